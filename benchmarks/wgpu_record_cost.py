"""Host cost of recording small wgpu ops through the core (us per op, GPU work excluded), for this source tree
and another one (--tree), in alternating fresh processes: the per-op overhead of a backend change, paired.

Each process times `--rounds` batches of 100 recorded ops (a synchronize before and after each batch, not
timed) and keeps the fastest batch per op; the table gives the min and median of those over `--pairs`
processes per tree.

    XDG_RUNTIME_DIR=/tmp python benchmarks/wgpu_record_cost.py --tree /path/to/other/checkout [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(rounds: int) -> dict[str, float]:
    import numpy as np

    import rumus as rm
    from rumus import backend_api
    from rumus_contracts import Device

    backend, dev = backend_api.backend("wgpu"), Device("wgpu", 0)
    a = rm.tensor(np.ones((128, 256), np.float32), device="wgpu")
    b, w = a * 2, rm.tensor(np.ones((256, 256), np.float32), device="wgpu")
    ops: dict[str, Callable[[], Any]] = {"add [128,256]": lambda: a + b, "relu [128,256]": lambda: rm.relu(a),
                                         "matmul 128x256x256": lambda: a @ w, "sum dim=1": lambda: a.sum(dim=1)}

    def batch(fn: Callable[[], Any], n: int = 100) -> float:
        backend.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = (time.perf_counter() - t0) / n * 1e6
        backend.synchronize(dev)
        return took
    for fn in ops.values():
        batch(fn)  # compile the programs, fill the pool
    return {name: min(batch(fn) for _ in range(rounds)) for name, fn in ops.items()}


def run_tree(tree: str, rounds: int) -> dict[str, float]:
    paths = [tree, *(os.path.join(tree, p) for p in ("contracts", "backends", "conformance"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "XDG_RUNTIME_DIR": os.environ.get("XDG_RUNTIME_DIR",
                                                                                                 "/tmp")}
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(rounds)], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="the other source tree (a checkout with its compiled kernels)")
    parser.add_argument("--pairs", type=int, default=5, help="processes per tree, alternating")
    parser.add_argument("--rounds", type=int, default=15, help="batches of 100 ops per process")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    trees = {"this tree": HERE, **({"--tree": os.path.abspath(args.tree)} if args.tree else {})}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for _ in range(args.pairs):
        for label, tree in trees.items():
            got[label].append(run_tree(tree, args.rounds))
    print(f"us per recorded op (min / median over {args.pairs} processes; load {os.getloadavg()[0]:.1f})")
    for op in got["this tree"][0]:
        cells = [f"{label}: {min(r[op] for r in rows):6.2f} / {statistics.median(r[op] for r in rows):6.2f}"
                 for label, rows in got.items()]
        print(f"{op:<20} " + "   ".join(cells))


if __name__ == "__main__":
    main()

"""Two builds of the CPU backend, paired: the MLP, CNN and transformer training steps in one process per
build, timed in alternating blocks for --rounds rounds (A first on even rounds, B first on odd).

    python benchmarks/cpu_pool_ab.py --a /tmp/old-checkout --b . --rounds 5
    python benchmarks/cpu_pool_ab.py --a /tmp/old-checkout --b . --threads 16 --spinners 1
    python benchmarks/cpu_pool_ab.py --a . --b . --env-b RUMUS_GEMM_KERNEL=blas --spinners 2 --anywhere

A build is a checkout with its C extensions built (for a pool change: keep the old checkout's .so files).
Each process imports that checkout's rumus; the steps and their timing are cpu_scaling.py's (median of
batched samples, ~0.3 s per step and block). --env-a / --env-b add environment variables to one side (A/B
a knob on one checkout). --spinners K keeps K processes spinning, pinned on the last K CPUs (--anywhere:
unpinned, like other programs' load), for the whole run (both sides meet the same neighbours). Printed
per round: each step's median per side; last, per step, min and median over rounds per side and the
median of B / A within rounds, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import IO, Any

HERE = os.path.dirname(os.path.abspath(__file__))
PATHS = ("", "contracts", "backends", "conformance", "plugins/rumus_graph", "plugins/rumus_vision")


def _worker() -> int:
    """Time the steps once per line read from stdin; one JSON line of seconds per step back."""
    sys.path.insert(0, HERE)
    import cpu_scaling

    import rumus as rm
    rm.zeros(1)
    cases = {k: v for k, v in cpu_scaling._rumus_cases().items() if k in cpu_scaling.STEPS}
    print(json.dumps({"rumus": rm.__file__}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({k: cpu_scaling._time(v, 0.3, 5)[0] for k, v in cases.items()}), flush=True)
    return 0


def _start(tree: str, threads: int | None, extra: list[str]) -> subprocess.Popen[str]:
    root = os.path.abspath(tree)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.join(root, p) for p in PATHS),
           "RUMUS_BACKEND": "cpu", **dict(kv.split("=", 1) for kv in extra)}
    if threads:
        env["RUMUS_NUM_THREADS"] = str(threads)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    print(f"{tree} {' '.join(extra)}: {_read(proc)['rumus']}", flush=True)
    return proc


def _read(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out: IO[str] | None = proc.stdout
    assert out is not None
    line = out.readline()
    if not line:
        raise SystemExit(f"a worker ended (exit {proc.wait()})")
    result: dict[str, Any] = json.loads(line)
    return result


def _block(proc: subprocess.Popen[str]) -> dict[str, float]:
    assert proc.stdin is not None
    proc.stdin.write("block\n")
    proc.stdin.flush()
    return _read(proc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", help="checkout A (the baseline)")
    p.add_argument("--b", help="checkout B (the change)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="RUMUS_NUM_THREADS for both (unset: the default)")
    p.add_argument("--env-a", nargs="*", default=[], metavar="KEY=VALUE", help="environment of A only")
    p.add_argument("--env-b", nargs="*", default=[], metavar="KEY=VALUE", help="environment of B only")
    p.add_argument("--spinners", type=int, default=0, help="busy processes, pinned on the last CPUs")
    p.add_argument("--anywhere", action="store_true", help="the spinners are not pinned")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker()
    if not args.a or not args.b:
        p.error("--a and --b name the two checkouts")
    print(f"load average before: {os.getloadavg()}", flush=True)
    spin = "while True: pass" if args.anywhere else "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass"
    hogs: list[subprocess.Popen[bytes]] = [subprocess.Popen([sys.executable, "-c", spin if args.anywhere else spin % c])
            for c in sorted(os.sched_getaffinity(0))[-args.spinners:]] if args.spinners else []
    procs = {"A": _start(args.a, args.threads, args.env_a), "B": _start(args.b, args.threads, args.env_b)}
    got: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    try:
        for r in range(args.rounds):
            for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                got[side].append(_block(procs[side]))
            print(f"round {r + 1}: " + "  ".join(
                f"{k} A {got['A'][-1][k] * 1e3:.3g} B {got['B'][-1][k] * 1e3:.3g} ms" for k in got["A"][-1]),
                flush=True)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"load average after: {os.getloadavg()}; {args.spinners} spinners{' (unpinned)' if args.anywhere else ''}; "
          f"threads {args.threads or 'default'}")
    print("| step | A min ms | A median ms | B min ms | B median ms | B / A (median of rounds) |")
    print("|---|---|---|---|---|---|")
    for k in got["A"][0]:
        a, b = [x[k] for x in got["A"]], [x[k] for x in got["B"]]
        ratio = statistics.median(y / x for x, y in zip(a, b, strict=True))
        print(f"| {k} | {min(a) * 1e3:.3f} | {statistics.median(a) * 1e3:.3f} | {min(b) * 1e3:.3f} | "
              f"{statistics.median(b) * 1e3:.3f} | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

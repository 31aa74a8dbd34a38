"""RUMUS's own float32 GEMM kernel (csrc/sgemm_kernel.c) against OpenBLAS and torch, at one thread: the
evidence for rumus_gemm_one's routing rule.

    python benchmarks/gemm_kernel.py                # the table (about a minute)
    python benchmarks/gemm_kernel.py --rounds 5     # more alternating rounds
    python benchmarks/gemm_kernel.py --rule         # the rule's edges: few columns, large calls, per ISA part

Three processes per round, alternating: RUMUS with RUMUS_GEMM_KERNEL=own, RUMUS with =blas (both at
RUMUS_NUM_THREADS=1) and torch (torch.set_num_threads(1)). Rows:
- single products, as the convolution calls them: one rumus_gemm_one call (cffi, pointers made beforehand)
  against torch.mm on the same operands (torch pays its dispatch, some microseconds, in each call);
- F.conv2d(x, w, padding=1).sum().backward() of the MNIST CNN's two convolutions (batch 64);
- the MLP's products through rumus.matmul / torch.matmul (its blocks, each one call), a 128-row block of a
  1024^2 product as one call, and 1024^2 through rumus.matmul.
Cells: microseconds, the best over rounds of the median of 5 batches; GMAC/s from the multiply-adds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# name: (m, n, k, ta, tb, how): C[m, n] = op(A) @ op(B); how: "one" = one rumus_gemm_one call,
# "matmul" = rumus.matmul / torch.matmul, "conv" = F.conv2d fwd+bwd (m, n, k: N, C_in, O; 28x28 or 14x14)
ROWS: dict[str, tuple[int, int, int, int, int, str]] = {
    "conv2 fwd [32x144]@[144x196]": (32, 196, 144, 0, 0, "one"),
    "conv2 dX W^T@gy [144x32]@[32x196]": (144, 196, 32, 1, 0, "one"),
    "conv2 dW gy@cols^T [32x196]@[196x144]": (32, 144, 196, 0, 1, "one"),
    "conv1 fwd+bwd 1->16 28x28 b64": (64, 1, 16, 0, 0, "conv"),
    "conv2 fwd+bwd 16->32 14x14 b64": (64, 16, 32, 0, 0, "conv"),
    "MLP fwd 128x784 @ 784x256": (128, 256, 784, 0, 0, "matmul"),
    "MLP dW 256x128 @ 128x784 (ta)": (256, 784, 128, 1, 0, "matmul"),
    "MLP dX 128x256 @ 256x784": (128, 784, 256, 0, 0, "matmul"),
    "1024^2 block 128x1024 @ 1024x1024": (128, 1024, 1024, 0, 0, "one"),
    "1024^2 matmul": (1024, 1024, 1024, 0, 0, "matmul"),
}


def macs(row: tuple[int, int, int, int, int, str]) -> float:
    m, n, k, _, _, how = row
    if how != "conv":
        return float(m * n * k)
    hw = 28 * 28 if n == 1 else 14 * 14
    return 3.0 * m * k * n * 9 * hw  # forward, input and weight gradients: N * O * C * 9 * HW each


def _operands(row: tuple[int, int, int, int, int, str]) -> tuple[Any, Any]:
    import numpy as np
    m, n, k, ta, tb, how = row
    rng = np.random.default_rng(0)
    if how == "conv":
        hw = 28 if n == 1 else 14
        return (rng.standard_normal((m, n, hw, hw)).astype(np.float32),
                (rng.standard_normal((k, n, 3, 3)) * 0.1).astype(np.float32))
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def _rumus_cases() -> dict[str, Callable[[], object]]:
    import numpy as np

    import rumus as rm
    from rumus.nn import functional as F
    from rumus_cpu._lib import ffi, lib
    cases: dict[str, Callable[[], object]] = {}
    for name, row in ROWS.items():
        m, n, k, ta, tb, how = row
        a, b = _operands(row)
        if how == "one":
            c = np.empty((m, n), np.float32)
            args = (0, ta, tb, m, n, k, ffi.from_buffer("float[]", a), a.shape[1], ffi.from_buffer("float[]", b),
                    b.shape[1], 0, ffi.from_buffer("float[]", c), n)
            cases[name] = lambda args=args: lib.rumus_gemm_one(*args)
        elif how == "matmul":
            ra, rb = rm.tensor(a), rm.tensor(b)
            oa = ra.mT if ta else ra
            cases[name] = lambda oa=oa, rb=rb: rm.matmul(oa, rb)
        else:
            x, w = rm.tensor(a, requires_grad=True), rm.tensor(b, requires_grad=True)
            cases[name] = lambda x=x, w=w: F.conv2d(x, w, padding=1).sum().backward()
    return cases


def _torch_cases() -> dict[str, Callable[[], object]]:
    import torch
    cases: dict[str, Callable[[], object]] = {}
    for name, row in ROWS.items():
        _, _, _, ta, tb, how = row
        a, b = (torch.from_numpy(v) for v in _operands(row))
        if how == "conv":
            x, w = a.requires_grad_(), b.requires_grad_()

            def conv(x: Any = x, w: Any = w) -> None:
                x.grad = w.grad = None
                torch.nn.functional.conv2d(x, w, padding=1).sum().backward()
            cases[name] = conv
        else:
            oa, ob = (a.T if ta else a), (b.T if tb else b)
            cases[name] = lambda oa=oa, ob=ob: torch.matmul(oa, ob)
    return cases


# --rule: (m, n, k, ta, tb) around the rule's edges (few columns; calls past 2^24 multiply-adds)
RULE_SHAPES = [(128, 1, 784, 0, 0), (1024, 2, 128, 0, 1), (128, 4, 784, 0, 0), (1024, 8, 128, 0, 1),
               (128, 10, 256, 0, 1), (128, 12, 784, 0, 0), (64, 16, 64, 0, 1), (1, 256, 784, 0, 0),
               (10, 256, 128, 1, 0), (16, 9, 676, 0, 1), (128, 256, 1, 0, 0), (128, 128, 256, 0, 1),
               (256, 256, 256, 0, 1), (128, 128, 1024, 0, 0), (256, 256, 2048, 0, 0), (512, 512, 4096, 0, 0)]


def rule_table() -> None:
    """One process, one thread: rumus_gemm_one on each ISA part of the own kernel and on OpenBLAS, the route
    forced through the test setters, turn by turn within each shape."""
    import numpy as np

    from _timing import bench
    from rumus_cpu._lib import ffi, lib
    best = int(lib.rumus_sgemm_set_isa(-1))
    parts = [(isa, name) for isa, name in ((2, "AVX-512"), (1, "AVX2")) if isa <= best]
    print("| m x n x k (ta, tb) | " + " | ".join(f"own {name} µs" for _, name in parts) + " | OpenBLAS µs | "
          + " | ".join(f"{name} vs OpenBLAS (auto takes it)" for _, name in parts) + " |")
    print("|---" * (2 * len(parts) + 2) + "|")
    for m, n, k, ta, tb in RULE_SHAPES:
        a, b = _operands((m, n, k, ta, tb, "one"))
        c = np.empty((m, n), np.float32)
        args = (0, ta, tb, m, n, k, ffi.from_buffer("float[]", a), a.shape[1], ffi.from_buffer("float[]", b),
                b.shape[1], 0, ffi.from_buffer("float[]", c), n)
        call = functools.partial(lib.rumus_gemm_one, *args)
        times: dict[str, float] = {}
        auto: dict[str, bool] = {}
        for _ in range(3):
            for isa, name in parts:
                lib.rumus_sgemm_set_isa(isa)
                lib.rumus_sgemm_set_mode(0)
                auto[name] = bool(lib.rumus_sgemm_routes(m, n, k))
                lib.rumus_sgemm_set_mode(2)
                t = bench(call, min_time=0.05) * 1e6
                times[name] = min(t, times.get(name, float("inf")))
            lib.rumus_sgemm_set_mode(1)
            t = bench(call, min_time=0.05) * 1e6
            times["blas"] = min(t, times.get("blas", float("inf")))
        lib.rumus_sgemm_set_isa(-1)
        lib.rumus_sgemm_set_mode(0)
        own = " | ".join(f"{times[name]:.2f}" for _, name in parts)
        ratio = " | ".join(f"{times['blas'] / times[name]:.2f}x ({'yes' if auto[name] else 'no'})" for _, name in parts)
        print(f"| {m}x{n}x{k} ({ta}, {tb}) | {own} | {times['blas']:.2f} | {ratio} |")


def worker(kind: str) -> None:
    from _timing import bench
    if kind == "torch":
        import torch
        torch.set_num_threads(1)
        cases = _torch_cases()
    else:
        cases = _rumus_cases()
    out = {name: bench(fn, min_time=0.15) * 1e6 for name, fn in cases.items()}
    print(json.dumps(out))


def _run(kind: str) -> dict[str, float]:
    env = {**os.environ, "RUMUS_NUM_THREADS": "1", "RUMUS_BACKEND": "cpu", "OMP_NUM_THREADS": "1"}
    if kind in ("own", "blas"):
        env["RUMUS_GEMM_KERNEL"] = kind
    proc = subprocess.run([sys.executable, __file__, "--worker", kind], env=env, capture_output=True, text=True,
                          check=True)
    got: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", choices=["own", "blas", "torch", "rule"])
    ap.add_argument("--rule", action="store_true", help="the routing rule's edges, per ISA part (one process)")
    args = ap.parse_args()
    if args.rule:
        env = {**os.environ, "RUMUS_NUM_THREADS": "1", "RUMUS_BACKEND": "cpu"}
        subprocess.run([sys.executable, __file__, "--worker", "rule"], env=env, check=True)
        return
    if args.worker == "rule":
        rule_table()
        return
    if args.worker:
        worker(args.worker)
        return
    kinds = ("own", "blas", "torch")
    best: dict[str, dict[str, float]] = {kind: {} for kind in kinds}
    for r in range(args.rounds):
        for kind in kinds[r % 3:] + kinds[:r % 3]:  # a different process first each round
            for name, us in _run(kind).items():
                best[kind][name] = min(us, best[kind].get(name, float("inf")))
    print("| row | own µs (GMAC/s) | OpenBLAS µs (GMAC/s) | torch µs (GMAC/s) | own vs OpenBLAS | own vs torch |")
    print("|---|---|---|---|---|---|")
    for name, row in ROWS.items():
        cells = [f"{best[k][name]:.1f} ({macs(row) / best[k][name] / 1e3:.1f})" for k in kinds]
        print(f"| {name} | {' | '.join(cells)} | {best['blas'][name] / best['own'][name]:.2f}x | "
              f"{best['torch'][name] / best['own'][name]:.2f}x |")


if __name__ == "__main__":
    main()

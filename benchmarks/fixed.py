"""FixedLinear 1024x1024, batch 64: rumus.fixed (C kernel, int64 accumulation, OpenMP) against the same
integer arithmetic written in numpy int64, in one run. Both results are checked equal bit for bit.

    PYTHONPATH=.:contracts:backends python benchmarks/fixed.py [--batch 64] [--features 1024]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import bench, table  # noqa: E402

import rumus.fixed as fx  # noqa: E402


def numpy_fixed_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, s: int) -> np.ndarray:
    """SPEC E in numpy int64: accumulate, add bias << s, round half away from zero, saturate."""
    acc = x.astype(np.int64) @ w.astype(np.int64) + (b.astype(np.int64) << s)
    if s:
        half = np.int64(1) << (s - 1)
        acc = np.where(acc >= 0, (acc + half) >> s, -((-acc + half) >> s))
    return np.clip(acc, -32768, 32767).astype(np.int16)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--scale-log2", type=int, default=8)
    args = parser.parse_args()
    m, n, s = args.batch, args.features, args.scale_log2
    rng = np.random.default_rng(0)
    x = rng.integers(-32768, 32768, (m, n)).astype(np.int16)
    w = rng.integers(-32768, 32768, (n, n)).astype(np.int16)
    b = rng.integers(-32768, 32768, (n,)).astype(np.int16)

    layer = fx.FixedLinear(w, b, s)
    xt = fx.tensor(x, x.shape, s)
    if not np.array_equal(layer(xt).fixed_i16_data(), numpy_fixed_linear(x, w, b, s)):
        raise SystemExit("rumus.fixed and numpy int64 disagree: the benchmark is void")

    from rumus_cpu.threads import get_num_threads
    t_rumus = bench(lambda: layer(xt))
    t_numpy = bench(lambda: numpy_fixed_linear(x, w, b, s))
    print(f"FixedLinear {n}x{n}, batch {m}, scale_log2 {s}: {m * n * n / 1e6:.0f}M int16 multiply-adds; "
          f"rumus kernel threads: {get_num_threads()}; outputs equal bit for bit\n")
    print(table([("rumus.fixed (C, int64 acc)", f"{t_rumus * 1e3:.2f}", "1.0x"),
                 ("numpy int64 (same formula)", f"{t_numpy * 1e3:.2f}", f"{t_numpy / t_rumus:.1f}x slower")],
                ("implementation", "ms / call (median)", "vs rumus")))
    print(f"\nratio numpy / rumus: {t_numpy / t_rumus:.1f}x")


if __name__ == "__main__":
    main()

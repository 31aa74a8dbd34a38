"""float16 / bfloat16 on the CPU backend vs float32, and vs PyTorch CPU in the same dtype: GEMM (float32
BLAS on converted tiles), elementwise (load, float32 math, one rounding), a row reduction and softmax.

    python benchmarks/cpu_half.py            # RUMUS_NUM_THREADS=16 for a 16-core run
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import bench, table  # noqa: E402

import rumus as rm  # noqa: E402
import rumus.nn.functional as F  # noqa: E402


def _pair(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _time(fn: Callable[[Any, Any], Any], a: Any, b: Any) -> float:
    return bench(lambda: fn(a, b))


def rows() -> list[tuple[str, ...]]:
    import torch
    torch.set_num_threads(rm.get_num_threads())
    out = []
    dtypes = (("float32", rm.float32, torch.float32), ("float16", rm.float16, torch.float16),
              ("bfloat16", rm.bfloat16, torch.bfloat16))
    cases = [
        ("matmul 1024^3", (1024, 1024), (1024, 1024), lambda a, b: a @ b, 2 * 1024**3),
        ("matmul 256x4096x4096", (256, 4096), (4096, 4096), lambda a, b: a @ b, 2 * 256 * 4096 * 4096),
        ("add 4M", (2048, 2048), (2048, 2048), lambda a, b: a + b, 0),
        ("gelu 4M", (2048, 2048), None, lambda a, b: F.gelu(a), 0),
        ("sum rows 4M", (2048, 2048), None, lambda a, b: a.sum(dim=1), 0),
        ("softmax rows 4M", (2048, 2048), None, lambda a, b: F.softmax(a, dim=1), 0),
    ]
    torch_ops = {"gelu 4M": lambda a, b: torch.nn.functional.gelu(a), "sum rows 4M": lambda a, b: a.sum(dim=1),
                 "softmax rows 4M": lambda a, b: torch.softmax(a, dim=1)}
    for name, sa, sb, fn, flops in cases:
        x, y = _pair(sa, 1), _pair(sb, 2) if sb else None
        for dname, rdt, tdt in dtypes:
            a = rm.tensor(x).to(rdt)
            b = rm.tensor(y).to(rdt) if y is not None else None
            ta = torch.from_numpy(x).to(tdt)
            tb = torch.from_numpy(y).to(tdt) if y is not None else None
            with rm.no_grad():
                t_rm = _time(fn, a, b)
            with torch.no_grad():
                t_torch = _time(torch_ops.get(name, fn), ta, tb)
            rate = f"{flops / t_rm / 1e9:.1f} GFLOP/s" if flops else ""
            out.append((name, dname, f"{t_rm * 1e3:.2f}", f"{t_torch * 1e3:.2f}", f"{t_torch / t_rm:.2f}", rate))
    return out


def main() -> None:
    print(f"# CPU float16/bfloat16 ({platform.processor() or platform.machine()}, rumus threads "
          f"{rm.get_num_threads()})\n")
    print(table(rows(), ("case", "dtype", "rumus ms", "torch ms", "torch/rumus", "rumus rate")))


if __name__ == "__main__":
    main()

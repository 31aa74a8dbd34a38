"""The LM step's GEMMs and FlashAttention in float32, float16 and bfloat16 on the GPU: what the WGSL kernels
reach in each dtype (issue 13: f16 operands loaded as f16, bfloat16 words unpacked in the tile loads, f32
accumulation everywhere; no tensor cores in WGSL).

    python3 benchmarks/amp_kernels.py                  # wgpu:0, torch CUDA beside it when present
    python3 benchmarks/amp_kernels.py --quick          # small shapes (a lavapipe smoke run)

Each cell is the time per launch of a batch of `--batch` launches between two syncs (the lone sync's cost
spread over the batch, not added per row), median of `--reps` batches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
TOK, D, FF = 4096, 1024, 4096
# (name, m, n, k, layout): Linear forward x @ W.T ("nt"), input gradient dY @ W ("nn"), weight gradient dY.T @ x
GEMMS = [("qkv fwd", TOK, 3 * D, D, "nt"), ("ffn1 fwd", TOK, FF, D, "nt"), ("ffn2 fwd", TOK, D, FF, "nt"),
         ("ffn1 dX", TOK, D, FF, "nn"), ("ffn1 dW", FF, D, TOK, "tn")]
ATTN = (4, 16, 1024, 64)  # B, H, S, D: the LM's causal attention


def per_launch(fn: Callable[[], object], sync: Callable[[], object], batch: int, reps: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / batch)
    return statistics.median(times)


def _operands(m: int, n: int, k: int, layout: str, make: Callable[[tuple[int, ...]], Any]) -> tuple[Any, Any]:
    a = make((k, m)).T if layout == "tn" else make((m, k))
    b = make((n, k)).T if layout == "nt" else make((k, n))
    return a, b


def _gemm(a: Any, b: Any, sync: Callable[[], object], batch: int, reps: int) -> float:
    return per_launch(lambda: a @ b, sync, batch, reps)


def _rumus_dtype(device: str, dt: str, gemms: list[Any], attn: tuple[int, ...], batch: int,
                 reps: int) -> dict[tuple[str, str], float]:
    import rumus as rm
    dev = rm.Device.parse(device)
    rng = np.random.default_rng(0)

    def sync() -> None:
        rm.synchronize(dev)

    def make(shape: tuple[int, ...]) -> Any:
        return rm.tensor(rng.uniform(-1, 1, shape).astype(np.float32), dtype=dt, device=device)
    out = {(name, dt): _gemm(*_operands(m, n, k, layout, make), sync, batch, reps)
           for name, m, n, k, layout in gemms}
    q, k_, v, g = (make(attn) for _ in range(4))
    zero = rm.tensor(0.0, dtype=dt, device=device)
    attrs = {"is_causal": True, "scale": None, "dropout_p": 0.0, "seed": 0, "offset": 0}
    o, lse = rm.ops.flash_attention.multi(q, k_, v, zero, zero, **attrs)
    out[("attention fwd", dt)] = per_launch(lambda: rm.ops.flash_attention.multi(q, k_, v, zero, zero, **attrs),
                                            sync, batch, reps)
    out[("attention bwd", dt)] = per_launch(
        lambda: rm.ops.flash_attention_backward.multi(q, k_, v, o, g, lse, zero, zero, **attrs), sync, batch, reps)
    return out


def _torch_dtype(torch: Any, dt: str, gemms: list[Any], attn: tuple[int, ...], batch: int,
                 reps: int) -> dict[tuple[str, str], float]:
    def make(shape: tuple[int, ...]) -> Any:
        return torch.rand(shape, device="cuda", dtype=getattr(torch, dt)) * 2 - 1
    sync = torch.cuda.synchronize
    out = {(name, dt): _gemm(*_operands(m, n, k, layout, make), sync, batch, reps)
           for name, m, n, k, layout in gemms}
    q, k_, v = (make(attn).requires_grad_(True) for _ in range(3))

    def fwd_bwd() -> None:
        torch.nn.functional.scaled_dot_product_attention(q, k_, v, is_causal=True).sum().backward()
    out[("attention fwd+bwd", dt)] = per_launch(fwd_bwd, sync, batch, reps)
    return out


def torch_rows(dtypes: tuple[str, ...], gemms: list[Any], attn: tuple[int, ...], batch: int,
               reps: int) -> dict[tuple[str, str], float]:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out: dict[tuple[str, str], float] = {}
    for dt in dtypes:
        out.update(_torch_dtype(torch, dt, gemms, attn, batch, reps))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--quick", action="store_true", help="small shapes")
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    gemms = [(n, 256, 256, 256, lay) for n, *_, lay in GEMMS[:2]] if args.quick else GEMMS
    attn = (1, 2, 128, 64) if args.quick else ATTN
    ours: dict[tuple[str, str], float] = {}
    for dt in DTYPES:
        ours.update(_rumus_dtype(args.device, dt, gemms, attn, args.batch, args.reps))
    theirs = {} if args.no_torch else torch_rows(DTYPES, gemms, attn, args.batch, args.reps)
    flops = {name: 2.0 * m * n * k for name, m, n, k, _ in gemms}
    rows = []
    for (name, dt), sec in ours.items():
        rate = f"{flops[name] / sec / 1e12:.1f}" if name in flops else ""
        t = theirs.get((name, dt))
        rows.append((name, dt, f"{sec * 1e3:.3f}", rate, f"{t * 1e3:.3f}" if t else ""))
    for (name, dt), t in theirs.items():
        if (name, dt) not in ours:
            rows.append((name, dt, "", "", f"{t * 1e3:.3f}"))
    print(table(rows, ("kernel", "dtype", "rumus ms", "rumus TFLOP/s", "torch CUDA ms (no TF32)")))


if __name__ == "__main__":
    main()

"""Causal attention forward + backward: rumus's FlashAttention (F.scaled_dot_product_attention) against
torch's SDPA on the same machine, time and peak memory on both sides, in one run.

    python benchmarks/attention.py                              # wgpu vs torch CUDA: seq 1k/4k/16k, 16 heads, d 64
    python benchmarks/attention.py --device cpu                 # rumus cpu vs torch cpu at smaller seqs
    python benchmarks/attention.py --seqs 128 --heads 2 --no-lm # a smoke run (lavapipe)

Besides the `--seqs` rows (batch `--batch`), the last row is the LM step's shape (`benchmarks/gpu_scale.py`:
batch 4, 16 heads, seq 1024, head dim 64; `--no-lm` leaves it out). On the H200 the whole default run
takes about a minute.

float32 on both sides by default (torch: TF32 off, so SDPA picks its memory-efficient fp32 kernel on CUDA);
`--dtype float16` / `bfloat16` runs both sides in that type (torch: its flash kernel). Times are
the median of `--reps` synchronized steps after one warm-up. Peak memory: torch's max_memory_allocated (and
reserved) over the step; rumus wgpu: the bytes its buffer pool holds from the driver after the step,
starting from an emptied pool (the pool only gives memory back when its cache limit is hit, so this is
the step's peak footprint, inputs included, like torch's figure). An [S, S] float32 score matrix per head
would need batch * heads * S^2 * 4 bytes (the `SxS` column): the fused kernels never allocate it.
On the CPU side the rumus figure is tracemalloc's peak (numpy buffers); torch's CPU memory is not traced.
On a machine where the project is not pip-installed, put the source roots on PYTHONPATH first
(`source .gpu/setup.sh` on the lent GPU machine); `--device cpu` there needs `python3 csrc/build_cpu_kernels.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tracemalloc
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import median_synced, table  # noqa: E402


LM_SHAPE = (4, 16, 1024, 64)  # batch, heads, seq, head dim of the LM step in benchmarks/gpu_scale.py


def rumus_case(device: str, batch: int, heads: int, seq: int, dim: int, reps: int,
               dtype: str = "float32") -> dict[str, Any]:
    import rumus as rm
    from rumus.nn import functional as F

    rng = np.random.default_rng(0)
    shape = (batch, heads, seq, dim)
    backend = rm._runtime.backend(device.split(":")[0])
    dev = rm.Device.parse(device)
    if device.startswith("wgpu"):
        backend.empty_cache(dev)
    q, k, v = (rm.tensor(rng.standard_normal(shape), dtype=dtype, device=device, requires_grad=True)
               for _ in range(3))
    grad = rm.tensor(rng.standard_normal(shape), dtype=dtype, device=device)

    def forward() -> None:
        with rm.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def step() -> None:
        q.grad = k.grad = v.grad = None
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert out.grad_fn is not None and out.grad_fn.name == "flash_attention", "not the flash path"
        out.backward(grad)

    def sync() -> None:
        rm.synchronize(dev)

    peak = None
    if device == "cpu":
        tracemalloc.start()
        step()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    fwd = median_synced(forward, sync, reps)
    total = median_synced(step, sync, reps)
    matrix = None
    if device.startswith("wgpu"):
        peak = backend.pool_stats(dev)["allocated_bytes"]
        cache = backend.device(dev.index or 0).programs._cache
        matrix = any(isinstance(key, tuple) and key[:1] == ("flash_attention_matrix",) for key in cache)
    return {"forward_s": fwd, "fwd_bwd_s": total, "peak_bytes": peak, "matrix_units": matrix}


def torch_case(device: str, batch: int, heads: int, seq: int, dim: int, reps: int,
               dtype: str = "float32") -> dict[str, Any] | None:
    try:
        import torch
        import torch.nn.functional as tf
    except ImportError:
        return None
    if device == "cuda" and not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = (batch, heads, seq, dim)
    q, k, v, grad = (torch.randn(shape, generator=gen).to(device, getattr(torch, dtype)) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)

    def forward() -> None:
        with torch.no_grad():
            tf.scaled_dot_product_attention(q, k, v, is_causal=True)

    def step() -> None:
        q.grad = k.grad = v.grad = None
        tf.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    fwd = median_synced(forward, sync, reps)
    peak = reserved = None
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    total = median_synced(step, sync, reps)
    if device == "cuda":
        peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    return {"forward_s": fwd, "fwd_bwd_s": total, "peak_bytes": peak, "reserved_bytes": reserved}


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.2f}"


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2 ** 20:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="wgpu", choices=["wgpu", "cpu"])
    ap.add_argument("--seqs", type=int, nargs="+", default=None)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="q, k, v and the gradient on both sides (float16: matrix units where the device has them)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-lm", action="store_true", help="leave out the LM step's shape [4, 16, 1024, 64]")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device)
    seqs = args.seqs or ([1024, 4096, 16384] if args.device == "wgpu" else [256, 1024, 2048])
    rdev, tdev = ("wgpu:0", "cuda") if args.device == "wgpu" else ("cpu", "cpu")
    rows, results = [], []
    cases = [(args.batch, args.heads, seq, args.head_dim) for seq in seqs]
    if not args.no_lm:
        cases.append(LM_SHAPE)
    for batch, heads, seq, dim in cases:
        r = rumus_case(rdev, batch, heads, seq, dim, args.reps, args.dtype)
        t = None if args.no_torch else torch_case(tdev, batch, heads, seq, dim, args.reps, args.dtype)
        results.append({"shape": [batch, heads, seq, dim], "rumus": r, "torch": t})
        ratio = f"{r['fwd_bwd_s'] / t['fwd_bwd_s']:.2f}x" if t else "-"
        sxs = batch * heads * seq * seq * 4
        rows.append((f"[{batch},{heads},{seq},{dim}]", _ms(r["forward_s"]), _ms(t["forward_s"] if t else None),
                     _ms(r["fwd_bwd_s"]), _ms(t["fwd_bwd_s"] if t else None), ratio, _mib(r["peak_bytes"]),
                     _mib(t["peak_bytes"] if t else None), _mib(sxs)))
        print(f"{rows[-1][0]}: {rows[-1][1:]} (forward on matrix units: {r['matrix_units']})", flush=True)
    print(f"\ncausal attention [batch, heads, seq, head dim], {args.dtype}; rumus {rdev} vs torch {tdev}")
    print(table(rows, ("shape", "rumus fwd ms", "torch fwd ms", "rumus fwd+bwd ms", "torch fwd+bwd ms", "ratio",
                       "rumus peak MiB", "torch peak MiB", "SxS MiB")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()

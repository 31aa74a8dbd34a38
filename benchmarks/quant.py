"""Quantized inference: quality table of a small LM and batch-1 GEMV 4096 x 4096 per scheme.

    python benchmarks/quant.py                   # CPU: quality table + GEMV float32 / q8 / int4 + weight bytes
    python benchmarks/quant.py --skip-quality    # GEMV only
    python benchmarks/quant.py --device wgpu     # rumus wgpu q8 / int4 GEMV vs torch float32 / float16 on CUDA

Speed ratios are against float32 in the same run (> 1 is faster). The CPU float32 row is rumus's own
matmul (numpy BLAS underneath); the quantized rows run the C kernels that dequantise in registers.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "quant"))

import rumus as rm  # noqa: E402
from _timing import bench, table  # noqa: E402
from rumus.backend_api import from_storage  # noqa: E402
from rumus_contracts import int4, q8  # noqa: E402
from rumus_contracts.ops import quant as layout  # noqa: E402


def quality() -> None:
    import tiny_lm
    model, data = tiny_lm.train()
    rows = [(name, "-" if g is None else str(g), f"{loss:.4f}", f"{ppl:.3f}")
            for name, g, loss, ppl in tiny_lm.quality_table(model, data)]
    print("held-out loss of the test-suite LM (tests/quant/tiny_lm.py)")
    print(table(rows, ("weights", "group", "loss", "perplexity")))


def gemv(device: str, k: int = 4096, n: int = 4096, g: int = 128, bs: int = 32) -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
    xh = rng.standard_normal((1, k)).astype(np.float32)
    x = rm.tensor(xh, device=device)
    wf = rm.tensor(w, device=device)
    q8w = from_storage(layout.q8_pack(w, bs), q8(bs), device)
    s, z = layout.int4_params(w, g)
    i4w = from_storage(layout.int4_pack_codes(layout.int4_codes(w, s, z, g), g), int4(g), device)
    st, zt = rm.tensor(s, device=device), rm.tensor(z, device=device)

    def sync(t: rm.Tensor) -> None:
        if device != "cpu":
            t[0, :1].numpy()  # a 4-byte read-back: the queue must finish

    runs = {
        "float32": lambda: sync(rm.matmul(x, wf)),
        f"q8({bs})": lambda: sync(rm.ops.q8_linear(x, q8w, n=n)),
        f"int4({g})": lambda: sync(rm.ops.int4_linear(x, i4w, st, zt)),
    }
    nbytes = {"float32": k * n * 4, f"q8({bs})": q8w.numel() * 4,
              f"int4({g})": i4w.numel() * 4 + 2 * s.size * 4}
    times = {name: bench(fn) for name, fn in runs.items()}
    rows = [(name, f"{times[name] * 1e6:.0f}", f"{nbytes[name] / 2**20:.1f}",
             f"{times['float32'] / times[name]:.2f}x") for name in runs]
    if device != "cpu":
        try:
            import torch
            if torch.cuda.is_available():
                for dt in (torch.float32, torch.float16):
                    tw = torch.tensor(w, device="cuda", dtype=dt)
                    tx = torch.tensor(xh, device="cuda", dtype=dt)
                    t = bench(lambda tx=tx, tw=tw: (tx @ tw)[0, :1].cpu())
                    rows.append((f"torch cuda {dt}".replace("torch.", ""), f"{t * 1e6:.0f}",
                                 f"{k * n * tw.element_size() / 2**20:.1f}", f"{times['float32'] / t:.2f}x"))
        except ImportError:
            pass
    print(f"batch-1 GEMV [1, {k}] x [{k}, {n}] on {device}")
    print(table(rows, ("weights", "us / call", "weight MiB", "speed vs float32")))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--skip-quality", action="store_true")
    p.add_argument("--size", type=int, default=4096, help="K = N of the GEMV")
    args = p.parse_args()
    if args.device == "cpu" and not args.skip_quality:
        quality()
    gemv(args.device, args.size, args.size)


if __name__ == "__main__":
    main()

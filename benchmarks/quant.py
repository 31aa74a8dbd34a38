"""Quantized inference: quality table of a small LM and batch-1 GEMV 4096 x 4096 per scheme.

    python benchmarks/quant.py                   # CPU: quality table + GEMV float32 / q8 / int4 + weight bytes
    python benchmarks/quant.py --skip-quality    # GEMV only
    python benchmarks/quant.py --gemv-only       # the same (the H200 table in well under 2 min:)
    RUMUS_BACKEND=wgpu python3 benchmarks/quant.py --device wgpu --skip-quality
                                                 # rumus wgpu q8 / int4 GEMV vs torch float32 / float16 on CUDA
    python benchmarks/quant.py --batch 64        # a [64, K] activation instead of batch 1

Speed ratios are against float32 in the same run (> 1 is faster). The CPU float32 row is rumus's own
matmul (numpy BLAS underneath); the quantized rows run the C kernels that dequantise in registers,
once per inner loop the CPU has (portable, avx2, avx512vnni: RUMUS_QUANT_ISA's names), best last.
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


def _isas(device: str) -> list[str | None]:
    """The CPU's quantized inner loops, each forced in turn (None: a device, nothing to force)."""
    if device != "cpu":
        return [None]
    from rumus_cpu._lib import lib
    from rumus_cpu.kernels_quant import ISA_NAMES
    return list(ISA_NAMES[:int(lib.rumus_quant_best_isa()) + 1])


def gemv(device: str, k: int = 4096, n: int = 4096, g: int = 128, bs: int = 32, m: int = 1) -> None:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
    xh = rng.standard_normal((m, k)).astype(np.float32)
    x = rm.tensor(xh, device=device)
    wf = rm.tensor(w, device=device)
    q8w = from_storage(layout.q8_pack(w, bs), q8(bs), device)
    s, z = layout.int4_params(w, g)
    i4w = from_storage(layout.int4_pack_codes(layout.int4_codes(w, s, z, g), g), int4(g), device)
    st, zt = rm.tensor(s, device=device), rm.tensor(z, device=device)

    def sync(t: rm.Tensor) -> None:
        if device != "cpu":
            t[0, :1].numpy()  # a 4-byte read-back: the queue must finish

    times = {"float32": bench(lambda: sync(rm.matmul(x, wf)))}
    nbytes = {"float32": k * n * 4}
    for isa in _isas(device):
        if isa is not None:
            from rumus_cpu.kernels_quant import force_isa
            force_isa(isa)
        tag = "" if isa is None else f" {isa}"
        times[f"q8({bs}){tag}"] = bench(lambda: sync(rm.ops.q8_linear(x, q8w, n=n)))
        times[f"int4({g}){tag}"] = bench(lambda: sync(rm.ops.int4_linear(x, i4w, st, zt)))
        nbytes[f"q8({bs}){tag}"] = q8w.numel() * 4
        nbytes[f"int4({g}){tag}"] = i4w.numel() * 4 + 2 * s.size * 4
    if device == "cpu":
        from rumus_cpu.kernels_quant import force_isa
        force_isa(None)
    rows = [(name, f"{t * 1e6:.0f}", f"{nbytes[name] / 2**20:.1f}", f"{times['float32'] / t:.2f}x")
            for name, t in times.items()]
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
    print(f"GEMV [{m}, {k}] x [{k}, {n}] on {device}")
    print(table(rows, ("weights", "us / call", "weight MiB", "speed vs float32")))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--skip-quality", "--gemv-only", action="store_true", help="only the GEMV table")
    p.add_argument("--size", type=int, default=4096, help="K = N of the GEMV")
    p.add_argument("--batch", type=int, default=1, help="rows of the activation")
    args = p.parse_args()
    if args.device == "cpu" and not args.skip_quality:
        quality()
    gemv(args.device, args.size, args.size, m=args.batch)


if __name__ == "__main__":
    main()

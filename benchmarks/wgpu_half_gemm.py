"""float16 GEMM through WGSL (shader-f16; no tensor-core instructions in WGSL) vs torch float16 and float32 on
CUDA, in TFLOP/s, one run (issue 13).

    python benchmarks/wgpu_half_gemm.py [--sizes 1024 4096 8192]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _timing import cuda_torch_fp32, median_synced, table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    import rumus as rm
    rows = []
    torch = cuda_torch_fp32()
    for n in args.sizes:
        flops = 2.0 * n ** 3
        row = [str(n)]
        for dtype in ("float16", "float32"):
            a = rm.randn(n, n, device=args.device).to(getattr(rm, dtype))
            b = rm.randn(n, n, device=args.device).to(getattr(rm, dtype))
            s = median_synced(lambda: rm.matmul(a, b), rm.synchronize, args.reps)  # noqa: B023
            row.append(f"{flops / s / 1e12:.1f}")
        if torch is not None:
            for dtype in (torch.float16, torch.float32):
                ta = torch.randn(n, n, device="cuda", dtype=dtype)
                tb = torch.randn(n, n, device="cuda", dtype=dtype)
                s = median_synced(lambda: ta @ tb, torch.cuda.synchronize, args.reps)  # noqa: B023
                row.append(f"{flops / s / 1e12:.1f}")
        else:
            row += ["-", "-"]
        rows.append(tuple(row))
    print(table(rows, ("n", "rumus wgpu f16 TFLOP/s", "rumus wgpu f32", "torch cuda f16", "torch cuda f32 (no TF32)")))


if __name__ == "__main__":
    main()

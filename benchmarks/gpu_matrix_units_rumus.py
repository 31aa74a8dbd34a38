"""float16 matmuls through RUMUS on the wgpu backend running on Dawn (RUMUS_WGPU_IMPL=dawn): which take the
matrix units (matrix_units.py), their error against numpy, and their time beside torch in the same run. On the
lent GPU, with the wgpudawn wheel in .gpu/dawn (see gpu_matrix_gemm_sweep.py):
    RUMUS_WGPU_IMPL=dawn python3 benchmarks/gpu_matrix_units_rumus.py   (writes $OUT/matrix_units_rumus.json)
"""
from __future__ import annotations

import json
import os
import time
import traceback
from typing import Any

import numpy as np

import rumus as rm

out: dict[str, Any] = {}
OUT = os.environ.get("OUT", "/tmp")


def save() -> None:
    tag = "_unchecked" if os.environ.get("RUMUS_WGPU_DAWN_UNCHECKED") == "1" else ""
    with open(os.path.join(OUT, f"matrix_units_rumus{tag}.json"), "w") as fh:
        json.dump(out, fh, indent=1, default=str)


def timed(fn: Any, reps: int, sync: Any) -> float:
    fn()
    sync()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main() -> None:
    from rumus_wgpu import matrix_units
    backend = rm._runtime.backend("wgpu")
    dev = backend.device(0)
    out["device"] = dev.description
    out["features"] = list(dev.features)
    out["matrix_units"] = matrix_units.available(dev)

    def sync() -> None:
        backend.synchronize(0)
    only = os.environ.get("RUMUS_CASES")
    rng = np.random.default_rng(0)
    cases = {"nn_4096": ((4096, 4096), (4096, 4096), False, False),
             "nt_4096": ((4096, 4096), (4096, 4096), False, True),
             "tn_4096": ((4096, 4096), (4096, 4096), True, False),
             "lm_qkv_8192x2304x768": ((8192, 768), (768, 2304), False, False),
             "lm_wgrad_768x2304x8192": ((8192, 768), (8192, 2304), True, False),
             "batch_12x1024x64x1024": ((12, 1024, 64), (12, 64, 1024), False, False),
             "ragged_1000x1032x776": ((1000, 776), (776, 1032), False, False)}
    for name, (sa, sb, ta, tb) in cases.items():
        if only and name not in only.split(","):
            continue
        try:
            a = rng.standard_normal(sa[::-1] if ta else sa).astype(np.float16)
            b = rng.standard_normal(sb[::-1] if tb else sb).astype(np.float16)
            x = rm.tensor(a, device="wgpu")
            y = rm.tensor(b, device="wgpu")
            xa = x.T if ta else x
            yb = y.T if tb else y
            na = a.T if ta else a
            nb = b.T if tb else b
            before = backend.stats()["dispatches"]
            got = (xa @ yb).numpy()
            want = na.astype(np.float32) @ nb.astype(np.float32)
            err = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
            m, k = na.shape[-2:]
            nn = nb.shape[-1]
            flops = 2.0 * m * k * nn * (na.shape[0] if na.ndim == 3 else 1)
            per = timed(lambda xa=xa, yb=yb: xa @ yb, max(5, min(200, int(3e12 / flops))), sync)
            out[name] = {"rel_err_f16_out": err, "dispatches": backend.stats()["dispatches"] - before,
                         "ms": per * 1e3, "tflops": flops / per / 1e12}
            import torch
            ta_ = torch.tensor(na.astype(np.float32), device="cuda").half()
            tb_ = torch.tensor(nb.astype(np.float32), device="cuda").half()
            for _ in range(3):
                ta_ @ tb_
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                ta_ @ tb_
            torch.cuda.synchronize()
            tper = (time.perf_counter() - t0) / 20
            out[name].update({"torch_f16_ms": tper * 1e3, "torch_f16_tflops": flops / tper / 1e12})
        except Exception:  # noqa: BLE001
            out[name] = traceback.format_exc()[-1500:]
        print(name, out[name], flush=True)
        save()
    if only:
        return
    # float32 through the same backend on Dawn (the WGSL GEMM; matrix units are float16 only)
    try:
        a = rng.standard_normal((4096, 4096)).astype(np.float32)
        x = rm.tensor(a, device="wgpu")
        per = timed(lambda: x @ x, 10, sync)
        out["f32_wgsl_on_dawn_4096"] = {"ms": per * 1e3, "tflops": 2 * 4096 ** 3 / per / 1e12}
    except Exception:  # noqa: BLE001
        out["f32_wgsl_on_dawn_4096"] = traceback.format_exc()[-1500:]
    try:  # the same f16 GEMM with the matrix units off: the WGSL fallback on Dawn
        os.environ["RUMUS_WGPU_MATRIX_UNITS"] = "0"
        a = rng.standard_normal((4096, 4096)).astype(np.float16)
        x = rm.tensor(a, device="wgpu")
        per = timed(lambda: x @ x, 10, sync)
        out["f16_wgsl_fallback_on_dawn_4096"] = {"ms": per * 1e3, "tflops": 2 * 4096 ** 3 / per / 1e12}
    except Exception:  # noqa: BLE001
        out["f16_wgsl_fallback_on_dawn_4096"] = traceback.format_exc()[-1500:]
    finally:
        os.environ.pop("RUMUS_WGPU_MATRIX_UNITS", None)


try:
    main()
except Exception:  # noqa: BLE001
    out["error"] = traceback.format_exc()[-3000:]
save()
print(json.dumps(out, indent=0, default=str)[-4000:])

"""The workgroup-staged subgroup-matrix f16 GEMM (backends/rumus_wgpu/matrix_gemm.py) on Dawn: tile configurations
swept at n = 4096 (f16 in, f32 accumulate), each checked against numpy (float32 product of the same f16 inputs),
then the layouts (NT, TN), an f16 C with bias + GELU, ragged shapes and a batch on the best tile; torch bf16/f16
GEMMs timed in the same run. On the lent GPU, with the wgpudawn wheel in .gpu/dawn:
    source .gpu/setup.sh; pip install -q --no-deps --target /tmp/dawn .gpu/dawn/*.whl
    PYTHONPATH=/tmp/dawn:$PYTHONPATH python3 benchmarks/gpu_matrix_gemm_sweep.py   (writes $OUT/matrix_gemm.json)
RUMUS_SWEEP=quick runs two tiles only, RUMUS_SWEEP=all adds the earlier rounds' tiles (docs/GPU_TENSOR_CORES.md).
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
import time
import traceback
from typing import Any

import numpy as np

sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", d) for d in ("contracts", "backends")]
from rumus_wgpu.matrix_gemm import MatrixTile, generate  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
T = MatrixTile
EARLIER = [T(128, 128, 32, 2, 2), T(128, 128, 32, 2, 4), T(128, 128, 16, 2, 2), T(128, 128, 64, 2, 2, double=False),
           T(256, 128, 32, 4, 2, double=False), T(256, 128, 16, 4, 2), T(128, 256, 16, 2, 4), T(64, 64, 32, 2, 2),
           T(128, 128, 32, 2, 4, group=8), T(128, 64, 32, 2, 2), T(64, 128, 32, 2, 2),
           T(128, 256, 32, 4, 2, double=False), T(128, 256, 32, 4, 4, double=False),
           T(256, 128, 32, 8, 2, double=False), T(128, 128, 32, 8, 1), T(128, 128, 32, 4, 1), T(128, 128, 32, 8, 2),
           T(64, 256, 32, 2, 4)]
out: dict[str, Any] = {}


def save() -> None:
    with open(os.path.join(OUT, "matrix_gemm.json"), "w") as fh:
        json.dump(out, fh, indent=1, default=str)


def open_device(wgpu: Any, extras: Any, toggles: list[str]) -> Any:
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    need = [f for f in ("chromium-experimental-subgroup-matrix", "shader-f16", "subgroups") if f in adapter.features]
    limits = {k: adapter.limits[k] for k in ("max-compute-workgroup-storage-size",
                                             "max-compute-invocations-per-workgroup",
                                             "max-compute-workgroup-size-x", "max-storage-buffer-binding-size",
                                             "max-buffer-size") if k in adapter.limits}
    out.setdefault("limits", limits)
    return extras.request_device_sync(adapter, required_features=need, required_limits=limits, enable_toggles=toggles)


class Gemm:
    """One compiled kernel and its launch on given operands."""

    def __init__(self, wgpu: Any, device: Any, tile: MatrixTile, a_t: bool, b_t: bool, c_dtype: str, direct: bool,
                 bias: str, act: str, exact: bool = False, diag: str = "") -> None:
        self.wgpu, self.device, self.tile = wgpu, device, tile
        self.src = generate(tile, a_t, b_t, c_dtype, direct, bias, act, exact)
        if diag == "nostage":
            self.src = re.sub(r"put_[ab]\(dst \*[^;]*;", "", self.src)
        t0 = time.perf_counter()
        mod = device.create_shader_module(code=self.src)
        self.pipe = device.create_compute_pipeline(layout="auto", compute={"module": mod, "entry_point": "main"})
        self.compile_s = time.perf_counter() - t0
        self.bias = bool(bias)

    def bind(self, bufs: list[Any], m: int, n: int, k: int, lda: int, ldb: int, ldc: int, batch: int = 1,
             strides: tuple[int, int, int] = (0, 0, 0)) -> None:
        t = self.tile
        self.grid = ((n + t.bn - 1) // t.bn, (m + t.bm - 1) // t.bm, batch)
        cfg = struct.pack("<16I", m, n, k, lda, ldb, ldc, 0, 0, 0, *strides, (k + t.bk - 1) // t.bk,
                          self.grid[0], self.grid[1], 0)
        ubuf = self.device.create_buffer_with_data(data=cfg, usage=self.wgpu.BufferUsage.UNIFORM)
        entries = [{"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(bufs)]
        entries.append({"binding": len(bufs), "resource": {"buffer": ubuf}})
        self.bg = self.device.create_bind_group(layout=self.pipe.get_bind_group_layout(0), entries=entries)
        self.c = bufs[0]

    def run(self, reps: int) -> float:
        enc = self.device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(self.pipe)
        p.set_bind_group(0, self.bg)
        for _ in range(reps):
            p.dispatch_workgroups(*self.grid)
        p.end()
        t0 = time.perf_counter()
        self.device.queue.submit([enc.finish()])
        self.device.queue.read_buffer(self.c, 0, 4)
        return time.perf_counter() - t0

    def time(self, flops: float) -> dict[str, float]:
        self.run(2)
        best, big = 1e9, max(23, int(2e12 / flops) + 3)  # >= ~2 TFLOP per timed batch: small sizes too
        for _ in range(3):
            t_small, t_big = self.run(3), self.run(big)
            best = min(best, (t_big - t_small) / (big - 3))
        return {"ms": best * 1e3, "tflops": flops / best / 1e12}


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


def main() -> None:
    import wgpudawn as wgpu
    from wgpudawn.backends.dawn import extras
    extras.set_instance_extras(enable_toggles=["allow_unsafe_apis", "vulkan_enable_f16_on_nvidia"])
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
    fast = open_device(wgpu, extras, ["disable_robustness", "disable_workgroup_init", "skip_validation"])
    robust = open_device(wgpu, extras, [])
    # bounds-safe: the hardware's robust buffer access instead of Dawn's index clamping (dawn.py's defaults)
    safe = open_device(wgpu, extras, ["vulkan_use_buffer_robust_access_2",
                                      "enable_integer_range_analysis_in_robustness",
                                      "vulkan_use_cooperative_matrix_robust_access"])
    out["adapter"] = str(fast.adapter.info.get("device"))
    n = 4096
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    t0 = time.perf_counter()
    want = a.astype(np.float32) @ b.astype(np.float32)
    out["numpy_ref_s"] = time.perf_counter() - t0
    flops = 2.0 * n ** 3

    def buffers(device: Any, *arrays: np.ndarray, c_bytes: int) -> list[Any]:
        c = device.create_buffer(size=c_bytes, usage=usage)
        return [c, *(device.create_buffer_with_data(data=np.ascontiguousarray(x).tobytes(), usage=usage)
                     for x in arrays)]

    ops = {id(d): buffers(d, a, b, c_bytes=n * n * 4) for d in (fast, robust, safe)}

    tile_of: dict[str, MatrixTile] = {}

    def sweep_one(name: str, device: Any, tile: MatrixTile, direct: bool = False, exact: bool = False,
                  diag: str = "") -> None:
        tile_of[name] = tile
        try:
            need = tile.shared_bytes(False, False, direct)
            if need > out["limits"]["max-compute-workgroup-storage-size"]:
                out[name] = f"skipped: {need} B of workgroup memory"
                return
            g = Gemm(wgpu, device, tile, False, False, "f32", direct, "", "", exact, diag)
            g.bind(ops[id(device)], n, n, n, n, n, n)
            g.run(1)
            got = np.frombuffer(device.queue.read_buffer(g.c), np.float32).reshape(n, n)
            res = {"rel_err": rel_err(got, want), "compile_s": g.compile_s, "shared_B": need, **g.time(flops)}
            out[name] = res
        except Exception as exc:  # noqa: BLE001
            out[name] = f"{type(exc).__name__}: {str(exc)[:1500]}"
        print(name, out[name], flush=True)
        save()

    # the earlier rounds' leaders (docs/GPU_TENSOR_CORES.md has every round's table)
    tiles = [T(128, 128, 32, 4, 2, group=8), T(128, 256, 32, 2, 4, double=False, group=8), T(128, 128, 32, 4, 2),
             T(128, 128, 32, 4, 2, group=4), T(128, 256, 32, 2, 4, double=False)]
    if os.environ.get("RUMUS_SWEEP") == "quick":
        tiles = tiles[:2]
    if os.environ.get("RUMUS_SWEEP") == "all":  # the earlier rounds' tiles too, bounds-checked loads, staged C
        for tile in EARLIER:
            sweep_one(f"nn_{tile.name()}", fast, tile)
    for tile in tiles:
        sweep_one(f"nn_{tile.name()}_exact_direct", fast, tile, direct=True, exact=True)
    for tile in tiles[:2]:
        sweep_one(f"nn_{tile.name()}", fast, tile)
        # no staging in the K loop (stale workgroup tiles, wrong results): what the math alone runs at
        sweep_one(f"nn_{tile.name()}_diag_nostage", fast, tile, direct=True, exact=True, diag="nostage")
    sweep_one(f"nn_{tiles[0].name()}_exact_direct_robust", robust, tiles[0], direct=True, exact=True)

    rated = [(v["tflops"], k) for k, v in out.items() if isinstance(v, dict) and k.startswith("nn_")
             and v.get("rel_err", 1) < 1e-4 and "_robust" not in k and "_diag" not in k]
    if rated:
        best_name = max(rated)[1]
        best = tile_of[best_name]
        out["best"] = best_name
        # layouts: the transposed operand stored transposed, so the reference stays a @ b
        aT, bT = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
        layouts = (("nt", False, True, a, bT, "f32"), ("tn", True, False, aT, b, "f32"),
                   ("tt", True, True, aT, bT, "f32"),
                   ("nn_f16c", False, False, a, b, "f16"))
        for tag, a_t, b_t, xa, xb, c_dt in layouts:
            try:
                g = Gemm(wgpu, fast, best, a_t, b_t, c_dt, False, "", "", exact=True)
                g.bind(buffers(fast, xa, xb, c_bytes=n * n * 4), n, n, n, n, n, n)
                g.run(1)
                dt = np.float32 if c_dt == "f32" else np.float16
                got = np.frombuffer(fast.queue.read_buffer(g.c), dt)[:n * n].reshape(n, n)
                out[f"{tag}_{best.name()}"] = {"rel_err": rel_err(got, want), **g.time(flops)}
            except Exception as exc:  # noqa: BLE001
                out[f"{tag}_{best.name()}"] = f"{type(exc).__name__}: {str(exc)[:1500]}"
            print(tag, out[f"{tag}_{best.name()}"], flush=True)
            save()
        # f16 C with a bias and tanh-GELU, on a ragged shape (M not a multiple of the block)
        try:
            m2, n2, k2 = 1000, 1032, 776
            a2 = rng.standard_normal((m2, k2)).astype(np.float16)
            b2 = rng.standard_normal((k2, n2)).astype(np.float16)
            bias = rng.standard_normal(n2).astype(np.float16)
            g = Gemm(wgpu, fast, best, False, False, "f16", False, "f16", "gelu_tanh")
            g.bind(buffers(fast, a2, b2, bias, c_bytes=m2 * n2 * 2), m2, n2, k2, k2, n2, n2)
            g.run(1)
            got = np.frombuffer(fast.queue.read_buffer(g.c), np.float16).reshape(m2, n2)
            x = a2.astype(np.float64) @ b2.astype(np.float64) + bias.astype(np.float64)
            ref = 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
            out["f16_bias_gelu_1000x1032x776"] = {"rel_err": rel_err(got, ref), **g.time(2.0 * m2 * n2 * k2)}
            # a batch of 4 (m, k) @ (k, n) with f32 C
            a3 = rng.standard_normal((4, 520, 264)).astype(np.float16)
            b3 = rng.standard_normal((4, 264, 136)).astype(np.float16)
            g = Gemm(wgpu, fast, best, False, False, "f32", False, "", "")
            g.bind(buffers(fast, a3, b3, c_bytes=4 * 520 * 136 * 4), 520, 136, 264, 264, 136, 136, batch=4,
                   strides=(520 * 264, 264 * 136, 520 * 136))
            g.run(1)
            got = np.frombuffer(fast.queue.read_buffer(g.c), np.float32).reshape(4, 520, 136)
            out["batch4_520x136x264"] = {"rel_err": rel_err(got, a3.astype(np.float64) @ b3.astype(np.float64))}
        except Exception:  # noqa: BLE001
            out["epilogue_error"] = traceback.format_exc()[-2000:]
        print("epilogue", out.get("f16_bias_gelu_1000x1032x776"), out.get("batch4_520x136x264"), flush=True)
        # other sizes on the best tile
        for s in (1024, 2048, 8192):
            try:
                xa = rng.standard_normal((s, s)).astype(np.float16)
                g = Gemm(wgpu, fast, best, False, False, "f32", False, "", "")
                g.bind(buffers(fast, xa, xa, c_bytes=s * s * 4), s, s, s, s, s, s)
                out[f"size_{s}"] = g.time(2.0 * s ** 3)
            except Exception as exc:  # noqa: BLE001
                out[f"size_{s}"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        save()


try:
    main()
except Exception:  # noqa: BLE001
    out["error"] = traceback.format_exc()[-3000:]

try:
    import torch
    for dt in (torch.bfloat16, torch.float16):
        for s in (1024, 2048, 4096, 8192):
            x = torch.randn(s, s, device="cuda", dtype=dt)
            for _ in range(3):
                x @ x
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                x @ x
            torch.cuda.synchronize()
            per = (time.perf_counter() - t0) / 20
            out[f"torch_{str(dt).split('.')[-1]}_{s}"] = {"ms": per * 1e3, "tflops": 2 * s ** 3 / per / 1e12}
except Exception:  # noqa: BLE001
    out["torch_error"] = traceback.format_exc()[-1000:]
save()
print(json.dumps({k: (v if not isinstance(v, dict) else {kk: round(vv, 6) if isinstance(vv, float) else vv
                                                          for kk, vv in v.items()}) for k, v in out.items()},
                 indent=0, default=str)[-6000:])

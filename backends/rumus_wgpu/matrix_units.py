"""float16 matmuls on matrix units (tensor cores), where the device has them; gemm.py's WGSL kernels elsewhere.

Only Dawn exposes matrix units to WGSL (`chromium_experimental_subgroup_matrix`), so this path exists when the
whole backend runs on Dawn (RUMUS_WGPU_IMPL=dawn, dawn.py) and the adapter offers an f16 16x16x16 config
with f32 results at subgroup size 32. `try_matmul` takes C = A @ B when A and B are float16 and C is float16
or float32, each operand is row-major or transposed (NN, NT, TN, TT) with row strides, offsets and the
copied extents multiples of 8 elements, and the batch folds to at most one dim; it returns False for
anything else and gemm.py runs the WGSL kernel. RUMUS_WGPU_MATRIX_UNITS=0 turns the path off.
"""

from __future__ import annotations

import struct
from typing import Any

from rumus_contracts import TensorArg, config

from .dawn import is_dawn
from .matrix_gemm import LANES, MatrixTile, generate

MATRIX_ENV = "RUMUS_WGPU_MATRIX_UNITS"
FEATURE = "chromium-experimental-subgroup-matrix"
# the fastest tile of the H200 sweep (benchmarks/gpu_matrix_gemm_sweep.py, docs/GPU_TENSOR_CORES.md)
TILE = MatrixTile(128, 128, 32, 4, 2, group=8)
MIN_DIM = 16  # smaller M, N or K: the WGSL kernel (a 16x16 tile would be mostly padding)


def _has_f16_config(dev: Any) -> bool:
    try:
        from wgpudawn.backends.dawn import extras
        configs = extras.get_adapter_properties(dev.adapter).get("subgroup_matrix_configs") or []
    except Exception:  # an older wgpudawn without the properties: no matrix units
        return False
    return any(c["component_type"] == "f16" and c["result_component_type"] == "f32"
               and (c["m"], c["n"], c["k"]) == (16, 16, 16)
               and c["min_subgroup_size"] <= LANES <= c["max_subgroup_size"] for c in configs)


def available(dev: Any) -> bool:
    """Whether the device runs float16 GEMMs on matrix units (probed once per device)."""
    have = getattr(dev, "_matrix_units", None)
    if have is None:
        have = dev._matrix_units = (is_dawn(dev.device) and FEATURE in dev.device.features
                                    and "shader-f16" in dev.device.features and _has_f16_config(dev))
    return bool(have) and config.flag(MATRIX_ENV)


def _operand_layout(s_rows: int, s_cols: int) -> tuple[bool, int] | None:
    """(transposed, row stride as stored) of an operand with these strides, or None for neither layout. A
    stride-0 (broadcast) row stride is a valid row stride: every row reads the same elements."""
    if s_cols == 1:
        return False, s_rows
    if s_rows == 1:
        return True, s_cols
    return None


def try_matmul(c: TensorArg, a: TensorArg, b: TensorArg) -> bool:
    """Record C = A @ B on matrix units when the operands allow it; False: not taken (nothing recorded)."""
    from .gemm import _batch
    from .layout import device_of
    if a.dtype.name != "float16" or b.dtype.name != "float16" or c.dtype.name not in ("float16", "float32"):
        return False
    if c.buffer is a.buffer or c.buffer is b.buffer or c.numel == 0:
        return False
    dev = device_of([c], [a, b])
    if not available(dev):
        return False
    k, n = a.shape[-1], c.shape[-1]
    sizes, dims, m, sam, scm = _batch(a, b, c)
    if len(sizes) > 1 or min(m, n, k) < MIN_DIM:
        return False
    sak = a.strides[-1] if k > 1 else 0
    sbk, sbn = b.strides[-2], b.strides[-1]
    scn = c.strides[-1]
    la = _operand_layout(sam, sak)
    lb = _operand_layout(sbk, sbn)
    if la is None or lb is None or scn != 1:
        return False
    (a_t, lda), (b_t, ldb) = la, lb
    bsa, bsb, bsc = dims[0] if sizes else (0, 0, 0)
    nbatch = sizes[0] if sizes else 1
    # 16-byte loads and stores: every stride, offset and contiguous extent a multiple of 8 elements
    extents = (m if a_t else k, k if b_t else n, n)
    if any(v % 8 for v in (lda, ldb, scm, a.offset, b.offset, c.offset, bsa, bsb, bsc, *extents)):
        return False
    t = TILE
    exact = m % t.bm == 0 and n % t.bn == 0 and k % t.bk == 0
    gx, gy = (n + t.bn - 1) // t.bn, (m + t.bm - 1) // t.bm
    if max(gx, gy, nbatch) > dev.max_groups:
        return False
    c_dtype = "f16" if c.dtype.name == "float16" else "f32"
    # f16 C goes through the kernel's epilogue; a direct f32 store into a workspace plus a cast copy measured
    # slower on the H200 (150 against 167 TFLOP/s at n = 4096)
    direct = exact and c_dtype == "f32"
    key = ("matrix_gemm", t, a_t, b_t, c_dtype, direct, exact)
    prog = dev.programs.get(key, lambda: generate(t, a_t, b_t, c_dtype, direct=direct, exact=exact))
    data = struct.pack("<16I", m, n, k, lda, ldb, scm, a.offset, b.offset, c.offset, bsa, bsb, bsc,
                       (k + t.bk - 1) // t.bk, gx, gy, 0)
    dev.recorder.dispatch(prog, [c.buffer, a.buffer, b.buffer], data, (gx, gy, nbatch))
    return True

"""Where a low-precision dtype can be tested: the default device when its backend has kernels for
every op the test needs in that dtype, else the wgpu device (float16 through shader-f16); a skip that
names the missing kernels when neither has them."""

from __future__ import annotations

import pytest

import rumus as rm
from rumus import RumusError

# the ops a lowered forward + backward of the SPEC models runs in the low dtype
BASE_OPS = ("copy", "matmul", "add", "mul", "sum", "relu", "where")


def _missing(backend: str, dtype: rm.DType, ops: tuple[str, ...]) -> list[str]:
    kernels = rm._runtime.plugins().kernels
    return [op for op in ops if kernels.find(op, backend, dtype) is None]


def device_for(dtype: rm.DType, only: str | None = None, needs: tuple[str, ...] = ()) -> str:
    """The device to test `dtype` on (`only="wgpu"`: the GPU or a skip; usable at import time)."""
    ops = (*BASE_OPS, *needs)
    default = rm.default_device()
    gaps = {default.backend: _missing(default.backend, dtype, ops)}
    if only is None and not gaps[default.backend]:
        return str(default)
    try:
        rm._runtime.backend("wgpu").devices()
    except RumusError as exc:
        pytest.skip(f"wgpu unavailable ({exc}); {default.backend} lacks {dtype} kernels for "
                    f"{gaps[default.backend]}", allow_module_level=True)
    gaps["wgpu"] = _missing("wgpu", dtype, ops)
    if dtype in rm._runtime.backend("wgpu").capabilities(rm.Device("wgpu", 0)).dtypes and not gaps["wgpu"]:
        return "wgpu:0"
    pytest.skip(f"no backend here has the {dtype} kernels this test needs: missing {gaps}",
                allow_module_level=True)

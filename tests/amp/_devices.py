"""Where a low-precision dtype can be tested: the default device when its backend has the dtype's
kernels, else the wgpu device (float16 through shader-f16); a clear skip when neither has them."""

from __future__ import annotations

import pytest

import rumus as rm
from rumus import RumusError


def _works(device: str, dtype: rm.DType) -> bool:
    try:
        a = rm.ones((2, 2), device=device).to(dtype)
        return bool(((a @ a).float().sum() == 8.0).item())
    except (RumusError, NotImplementedError):
        return False


def device_for(dtype: rm.DType, only: str | None = None) -> str:
    """The device to test `dtype` on (`only="wgpu"`: the GPU or a skip; at import time too)."""
    default = str(rm.default_device())
    if only is None and _works(default, dtype):
        return default
    try:
        rm._runtime.backend("wgpu").devices()
    except RumusError as exc:
        pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)
    if _works("wgpu:0", dtype):
        return "wgpu:0"
    pytest.skip(f"no backend here has {dtype} kernels (the CPU's come with issue 13 part A)",
                allow_module_level=True)

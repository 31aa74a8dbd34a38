"""The devices that tests "on every backend" run on, and the wgpu backend for wgpu-only test modules:
one place that decides whether a WebGPU adapter is there. (tests/ is on sys.path through its conftest.)"""

from __future__ import annotations

from typing import Any

import pytest

import rumus as rm
from rumus import BackendUnavailable


def devices() -> list[str]:
    """cpu, then wgpu:0 where a WebGPU adapter exists."""
    try:
        rm._runtime.backend("wgpu").devices()
    except BackendUnavailable:
        return ["cpu"]
    return ["cpu", "wgpu:0"]


def wgpu_backend_or_skip() -> Any:
    """The wgpu backend, with its device 0 ready; skips the calling test module where it is unavailable
    (no adapter, or wgpu not installed)."""
    try:
        backend = rm._runtime.backend("wgpu")
        backend.devices()
    except BackendUnavailable as exc:
        pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)
    return backend

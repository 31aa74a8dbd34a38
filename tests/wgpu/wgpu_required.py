"""The wgpu backend and device for a test module, or a module-level skip where no adapter is present."""

from typing import Any

import pytest

import rumus as rm
from rumus import BackendUnavailable


def wgpu_or_skip() -> tuple[Any, str]:
    try:
        backend = rm._runtime.backend("wgpu")
        backend.devices()
    except BackendUnavailable as exc:
        pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)
    return backend, "wgpu:0"

"""The wgpu backend for tests that call its kernels directly (no core): the backend, device 0, its
capabilities and the core op registry, or a skip of the importing test module where wgpu or an
adapter is missing."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("wgpu")

from rumus_contracts import BackendUnavailable, Device, OpRegistry  # noqa: E402
from rumus_contracts.ops import register_core_ops  # noqa: E402

try:
    from rumus_wgpu.backend import WgpuBackend

    BACKEND = WgpuBackend()
    DEV = Device("wgpu", 0)
    CAPS: Any = BACKEND.capabilities(DEV)
except BackendUnavailable as exc:  # pragma: no cover - machines without any adapter
    pytest.skip(f"no wgpu adapter: {exc}", allow_module_level=True)

OPS = OpRegistry()
register_core_ops(OPS)

"""Fixtures: `device` runs a test on cpu and on wgpu (skipped when no WebGPU adapter is present)."""

from __future__ import annotations

import pytest

from rumus import backend_api
from rumus_contracts import RumusError


def _available(name: str) -> bool:
    try:
        backend_api.backend(name)
        return True
    except RumusError:
        return False


@pytest.fixture(params=["cpu", "wgpu"])
def device(request: pytest.FixtureRequest) -> str:
    if not _available(request.param):
        pytest.skip(f"backend {request.param} unavailable")
    return str(request.param)

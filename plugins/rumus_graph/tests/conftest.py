"""Fixtures: `device` runs a test on cpu and on wgpu (skipped when no WebGPU adapter is present)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from rumus import backend_api
from rumus_contracts import RumusError


# as the core's tests/conftest.py: CI replays a fixed, derandomized sequence of property-test examples
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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

"""Devices the compile tests run on: the CPU always, WebGPU when an adapter exists (lavapipe in CI)."""

from __future__ import annotations

import os

import pytest

from rumus import BackendUnavailable, backend_api


def _devices() -> list[str]:
    out = ["cpu"]
    try:
        backend_api.backend("wgpu").devices()
        out.append("wgpu:0")
    except BackendUnavailable:
        pass
    return out


DEVICES = _devices()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return str(request.param)


CACHE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build",
                     "rumus-fused-test")


@pytest.fixture(autouse=True)
def _checkout_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fused C modules go to build/ in the checkout (kept between runs, so only a first run compiles them),
    never to the user's ~/.cache."""
    monkeypatch.setenv("RUMUS_CACHE_DIR", CACHE)

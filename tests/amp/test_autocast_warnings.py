"""autocast on a device type RUMUS cannot cast for warns and disables itself, as torch.autocast does for an
unavailable device ("CUDA is not available ... Disabling autocast."); an unknown name raises RuntimeError
as torch's does; a block whose ops all ran on another device's tensors says it cast nothing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import rumus as rm
from rumus import _runtime

X = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)


def _wgpu_usable() -> bool:
    return "wgpu" in _runtime.plugins().backends.names() and _runtime.plugins().backends.status("wgpu") == "ok"


def test_a_torch_device_type_rumus_has_no_backend_for_warns_and_disables() -> None:
    with pytest.warns(UserWarning, match="'xpu', but RUMUS has no such backend .*Disabling autocast"):
        ctx = rm.autocast("xpu")
    with ctx:
        assert not rm.amp.is_autocast_enabled()
        x = rm.tensor(X)
        assert (x @ x).dtype == rm.float32


def test_an_unknown_device_type_raises_runtime_error_as_torch_does() -> None:
    with pytest.raises(RuntimeError):
        torch.autocast("nope")
    with pytest.raises(RuntimeError, match="unknown device_type 'nope'"):
        rm.autocast("nope")


def test_an_unavailable_backend_warns_and_disables(monkeypatch: pytest.MonkeyPatch) -> None:
    backends = _runtime.plugins().backends
    real = backends.status
    monkeypatch.setattr(backends, "status", lambda name: "no adapter found" if name == "wgpu" else real(name))
    if "wgpu" not in backends.names():
        pytest.skip("the wgpu backend is not installed")
    with pytest.warns(UserWarning, match=r"'cuda' \(the wgpu backend here\), but the wgpu backend is not "
                                         r"available \(no adapter found\). Disabling autocast"):
        ctx = rm.autocast("cuda")
    assert not ctx.enabled


@pytest.mark.skipif(not _wgpu_usable(), reason="needs a wgpu device (lavapipe works)")
def test_a_block_whose_ops_all_ran_elsewhere_says_it_cast_nothing() -> None:
    x = rm.tensor(X)
    with pytest.warns(UserWarning, match=r"autocast\('wgpu'\) cast nothing: none of the 2 ops"):
        with rm.autocast("cuda", dtype=rm.float16):
            assert (x @ x).dtype == rm.float32 and (x @ x.T).dtype == rm.float32
    g = x.to("wgpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rm.autocast("wgpu", dtype=rm.float16):
            assert (g @ g).dtype == rm.float16
            x @ x  # a cpu op beside a cast one: the block did cast, no warning


def test_autocast_on_the_tensors_device_is_silent() -> None:
    x = rm.tensor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rm.autocast("cpu", dtype=rm.bfloat16):
            assert (x @ x).dtype == rm.bfloat16
        with rm.autocast("cpu", enabled=False):
            x @ x

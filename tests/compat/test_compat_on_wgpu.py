"""The compat layer on the WebGPU backend: composites (built from kernels wgpu has) run there and agree with
the CPU; argsort/sort/topk, which have no WGSL kernel yet, refuse with KernelNotFound — never a silent CPU
fallback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable, KernelNotFound

try:
    rm._runtime.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)

F = rm.nn.functional
CASES: list[tuple[str, Any]] = [
    ("tril", lambda x: rm.tril(x)), ("flip", lambda x: x.flip(1)), ("roll", lambda x: x.roll(1, 0)),
    ("repeat", lambda x: x.repeat(2, 1)), ("cumsum", lambda x: x.cumsum(1)), ("norm", lambda x: x.norm(dim=1)),
    ("einsum", lambda x: rm.einsum("ij,kj->ik", x, x)), ("pad", lambda x: F.pad(x, (1, 2), mode="reflect")),
    ("interpolate", lambda x: F.interpolate(x.reshape(1, 1, 3, 4), scale_factor=2, mode="bilinear")),
    ("normalize", lambda x: F.normalize(x, dim=1)), ("masked_fill", lambda x: x.masked_fill(x > 0, 0.0)),
]


@pytest.mark.parametrize(("name", "fn"), CASES, ids=[c[0] for c in CASES])
def test_composites_run_on_wgpu_and_match_cpu(name: str, fn: Any) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    want = fn(rm.from_numpy(x)).numpy()
    got = fn(rm.from_numpy(x).to("wgpu:0"))
    assert str(got.device).startswith("wgpu")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_lstm_forward_and_backward_on_wgpu() -> None:
    rm.manual_seed(0)
    m = rm.nn.LSTM(3, 4, num_layers=2)
    x = np.random.default_rng(1).standard_normal((5, 2, 3)).astype(np.float32)
    want = m(rm.from_numpy(x))[0].numpy()
    m.to("wgpu:0")
    y, _ = m(rm.from_numpy(x).to("wgpu:0"))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
    y.sum().backward()
    assert m.weight_hh_l1.grad is not None and str(m.weight_hh_l1.grad.device).startswith("wgpu")


def test_sorting_has_no_wgpu_kernel_and_says_so() -> None:
    x = rm.ones(4).to("wgpu:0")
    with pytest.raises(KernelNotFound, match="argsort"):
        x.sort()
    with pytest.raises(KernelNotFound, match="argsort"):
        rm.topk(x, 2)

"""The compat layer on the WebGPU backend: composites (built from kernels wgpu has) and the WGSL argsort
behind sort/topk run there and agree with the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable

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


def test_sort_and_topk_on_wgpu_match_cpu_with_ties_and_nan() -> None:
    data = [[3.0, 1.0, float("nan"), 1.0, 3.0], [0.0, 5.0, 5.0, -1.0, 0.0]]
    for dtype in ("float32", "int32", "int64"):
        rows = [[0.0 if v != v else v for v in r] for r in data] if dtype != "float32" else data
        cpu = rm.tensor(rows, dtype=dtype)
        gpu = cpu.to("wgpu:0")
        for dim in (0, 1):
            for desc in (False, True):
                assert gpu.argsort(dim=dim, descending=desc).tolist() == cpu.argsort(dim=dim, descending=desc).tolist()
        np.testing.assert_array_equal(rm.topk(gpu, 2).values.numpy(), rm.topk(cpu, 2).values.numpy())
    x = rm.randn(3, 40, requires_grad=True)
    xg = x.detach().to("wgpu:0").requires_grad_(True)
    rm.topk(xg, 5).values.sum().backward()
    rm.topk(x, 5).values.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), x.grad.numpy())

"""The fused softmax / log_softmax backward kernels on wgpu: values against float64 for every launch
shape, the autograd formulas dispatching them (one kernel, not four), gradients against finite
differences, and double backward still going through differentiable ops."""

import numpy as np
import pytest

import rumus as rm
from rumus.ops import get as op
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

RNG = np.random.default_rng(11)
SHAPES = [((7, 1), 1), ((7, 3), 1), ((5, 4), 1), ((6, 5), 1), ((3, 255), 1), ((3, 256), 1), ((3, 257), 1),
          ((4, 1000), 1), ((2, 4096), 1), ((2, 32001), 1), ((1, 100_000), 1), ((300, 40), 1), ((33, 600), 0),
          ((3, 5, 4, 9), 2)]


def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _reference(name: str, g: np.ndarray, y: np.ndarray, dim: int) -> np.ndarray:
    if name == "softmax":
        return y * (g - (g * y).sum(axis=dim, keepdims=True))
    return g - np.exp(y) * g.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("path", [{}, {"RUMUS_WGPU_NO_SUBGROUPS": "1"}, {"RUMUS_WGPU_NOVEC": "1"}],
                         ids=["default", "workgroup", "scalar"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_fused_kernels_match_float64(name, path, monkeypatch):
    for k, v in path.items():
        monkeypatch.setenv(k, v)
    for shape, dim in SHAPES:
        x, g = RNG.standard_normal(shape) * 3, RNG.standard_normal(shape)
        y = _softmax(x, dim) if name == "softmax" else np.log(_softmax(x, dim))
        y32, g32 = y.astype(np.float32), g.astype(np.float32)
        got = op(f"{name}_backward")(rm.tensor(g32, device=DEVICE), rm.tensor(y32, device=DEVICE), dim=dim).numpy()
        want = _reference(name, g32.astype(np.float64), y32.astype(np.float64), dim)
        # float32 sums over up to 1e5 terms: a few ulp of the row's scale
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.sqrt(shape[dim]) / 10 + 1e-6,
                                   err_msg=f"{name} {shape} dim {dim}")


def test_strided_and_offset_inputs_are_copied_then_fused():
    base = RNG.standard_normal((6, 64))
    y = rm.tensor(_softmax(base, 1).astype(np.float32), device=DEVICE)[1:, ::2]
    g = rm.tensor(RNG.standard_normal((6, 64)).astype(np.float32), device=DEVICE)[:5, 1::2]
    got = op("softmax_backward")(g, y, dim=1).numpy()
    np.testing.assert_allclose(got, _reference("softmax", g.numpy().astype(np.float64),
                                               y.numpy().astype(np.float64), 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_backward_runs_one_fused_kernel(name):
    x = rm.tensor(RNG.standard_normal((4, 300)).astype(np.float32), device=DEVICE, requires_grad=True)
    y = getattr(rm, name)(x, 1)
    g = rm.tensor(RNG.standard_normal((4, 300)).astype(np.float32), device=DEVICE)
    BACKEND.flush(0)
    before = BACKEND.stats(0)["dispatches"]
    y.backward(g)
    # the unfused formula is four kernels (mul, sum, sub, mul / exp, sum, mul, sub)
    assert BACKEND.stats(0)["dispatches"] - before == 1
    want = _reference(name, g.numpy().astype(np.float64), y.detach().numpy().astype(np.float64), 1)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "dim"), [((3, 7), 1), ((5, 4), 0), ((2, 9000), 1)])
def test_gradient_matches_finite_differences(name, shape, dim):
    x = RNG.standard_normal(shape)
    w = RNG.standard_normal(shape)

    def loss(v: np.ndarray) -> float:  # float64 reference of sum(w * op(x))
        s = _softmax(v, dim)
        return float((w * (s if name == "softmax" else np.log(s))).sum())
    xt = rm.tensor(x.astype(np.float32), device=DEVICE, requires_grad=True)
    (getattr(rm, name)(xt, dim) * rm.tensor(w.astype(np.float32), device=DEVICE)).sum().backward()
    got = xt.grad.numpy()
    idx = [tuple(RNG.integers(0, n) for n in shape) for _ in range(6)]
    h = 1e-6
    for i in idx:
        e = np.zeros(shape)
        e[i] = h
        numeric = (loss(x + e) - loss(x - e)) / (2 * h)
        assert abs(got[i] - numeric) <= 1e-4 + 1e-3 * abs(numeric), (i, got[i], numeric)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_double_backward_differentiates_through_the_saved_output(name):
    # create_graph: the formula runs as differentiable ops (not the fused kernel) and its saved output y
    # carries the dependence on x (it was silently treated as a constant before)
    import torch
    xn = RNG.standard_normal((3, 6))
    x = rm.tensor(xn.astype(np.float32), device=DEVICE, requires_grad=True)
    y = getattr(rm, name)(x, 1)
    (gx,) = rm.autograd.grad((y * y).sum(), x, create_graph=True)
    (gx * gx).sum().backward()
    xt = torch.tensor(xn, requires_grad=True)
    yt = getattr(torch, name)(xt, 1)
    (gt,) = torch.autograd.grad((yt * yt).sum(), xt, create_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6 * np.abs(xt.grad.numpy()).max())

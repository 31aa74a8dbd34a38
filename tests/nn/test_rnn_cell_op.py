"""The rnn_cell op (an Elman RNN step as one graph node) behind RNNCell and the RNN layer: values and
gradients against float64 PyTorch, first and second order, finite differences through the op and its
fused backward, the CPU kernels against the composite bit for bit, the cases that stay unfused, and
the tanh / sigmoid backward ops from the output."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
import rumus.nn as rnn
from rumus.nn import _functional_rnn
from rumus.ops import get as op
from rumus_contracts import float64

torch = pytest.importorskip("torch")

ACTS = ["tanh", "relu"]


def _copy_params(mine: Any, theirs: Any, dtype: Any = np.float64) -> None:
    for name, p in theirs.named_parameters():
        getattr(mine, name).data = rm.tensor(p.detach().numpy().astype(dtype))


def _seq(steps: int, batch: int, features: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((steps, batch, features))


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("act", ACTS)
def test_rnn_cell_over_a_sequence_matches_float64_torch(act: str, batch: int) -> None:
    torch.manual_seed(0)
    tc = torch.nn.RNNCell(6, 9, nonlinearity=act).double()
    rc = rnn.RNNCell(6, 9, nonlinearity=act, dtype=rm.float64)
    _copy_params(rc, tc)
    xs = _seq(5, batch, 6, 1)
    th, h = torch.zeros(batch, 9, dtype=torch.float64), rm.zeros(batch, 9, dtype=rm.float64)
    t_loss, loss = 0.0, None
    for t in range(5):
        th, h = tc(torch.tensor(xs[t]), th), rc(rm.tensor(xs[t]), h)
        assert h.grad_fn is not None and h.grad_fn.name == "rnn_cell"  # one node per step
        t_loss = t_loss + (th * th).sum()
        loss = (h * h).sum() if loss is None else loss + (h * h).sum()
    assert loss is not None
    t_loss.backward()  # type: ignore[union-attr]
    loss.backward()
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), rtol=1e-12, atol=1e-12)
    for name, p in tc.named_parameters():
        np.testing.assert_allclose(getattr(rc, name).grad.numpy(), p.grad.numpy(), rtol=1e-11, atol=1e-11,
                                   err_msg=name)


@pytest.mark.parametrize("act", ACTS)
def test_the_rnn_layer_matches_float32_torch(act: str) -> None:
    torch.manual_seed(1)
    t = torch.nn.RNN(5, 8, num_layers=2, nonlinearity=act, bidirectional=True)
    r = rnn.RNN(5, 8, num_layers=2, nonlinearity=act, bidirectional=True)
    _copy_params(r, t, np.float32)
    x = _seq(7, 3, 5, 2).astype(np.float32)
    to, th = t(torch.tensor(x))
    ro, rh = r(rm.tensor(x))
    (to * to).sum().backward()
    (ro * ro).sum().backward()
    np.testing.assert_allclose(ro.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rh.detach().numpy(), th.detach().numpy(), rtol=1e-5, atol=1e-6)
    for name, p in t.named_parameters():
        np.testing.assert_allclose(getattr(r, name).grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("name", ["rnn_cell", "rnn_cell_backward"])
def test_finite_differences_through_the_op(name: str) -> None:
    from rumus_conformance.harness import check_gradient
    schema = op(name).schema
    samples = [s for s in schema.samples(np.random.default_rng(3)) if s.grad]  # type: ignore[misc]
    if name == "rnn_cell":
        assert len(samples) >= 8
    for sample in samples:
        assert check_gradient(schema, sample, float64, "cpu", False) is None, sample.name
        assert check_gradient(schema, sample, float64, "cpu", True) is None, sample.name  # non-contiguous


@pytest.mark.parametrize("act", ACTS)
def test_double_backward_matches_torch(act: str) -> None:
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 5)), rng.standard_normal((3, 5)), rng.standard_normal((5, 5)) * 0.5,
              rng.standard_normal(5)]
    gy = rng.standard_normal((3, 5))

    def mine() -> list[np.ndarray]:
        xw, h, w, b = (rm.tensor(a, requires_grad=True) for a in arrays)
        y = _functional_rnn.rnn_step(xw, h, w, b, act)
        assert y.grad_fn is not None and y.grad_fn.name == "rnn_cell"
        grads = rm.autograd.grad((y * y * rm.tensor(gy)).sum(), [xw, h, w, b], create_graph=True)
        sum(((g * g * g).sum() for g in grads if g is not None), rm.tensor(0.0, dtype=rm.float64)).backward()
        return [t.grad.numpy() for t in (xw, h, w, b) if t.grad is not None]

    def theirs() -> list[np.ndarray]:
        xw, h, w, b = (torch.tensor(a, requires_grad=True) for a in arrays)
        pre = xw + torch.nn.functional.linear(h, w, b)
        y = torch.tanh(pre) if act == "tanh" else torch.relu(pre)
        grads = torch.autograd.grad((y * y * torch.tensor(gy)).sum(), [xw, h, w, b], create_graph=True)
        sum((g * g * g).sum() for g in grads).backward()
        return [t.grad.numpy() for t in (xw, h, w, b)]

    got, want = mine(), theirs()
    assert len(got) == 4
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-10)


def _step_results(use_op: bool, act: str, dt: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    xw, h, w, b = (rm.tensor(a.astype(dt), requires_grad=True) for a in (
        rng.standard_normal((4, 33)), rng.standard_normal((4, 33)), rng.standard_normal((33, 33)) * 0.2,
        rng.standard_normal(33)))
    fn = _functional_rnn.rnn_step if use_op else _functional_rnn._rnn_cell_op  # the op, or its composite's ops
    y = fn(xw, h, w, b, act) if use_op else fn(xw, h, w, b, nonlinearity=act)
    assert (y.grad_fn.name == "rnn_cell") == use_op  # type: ignore[union-attr]
    y.backward(rm.tensor(rng.standard_normal((4, 33)).astype(dt)))
    return [y.detach().numpy(), *(t.grad.numpy() for t in (xw, h, w, b))]  # type: ignore[union-attr]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("act", ACTS)
def test_the_cpu_kernels_give_the_composites_bits(act: str, dt: Any) -> None:
    for fused, unfused in zip(_step_results(True, act, dt), _step_results(False, act, dt)):
        assert np.array_equal(fused, unfused)


def test_steps_without_a_bias_or_in_mixed_dtypes_stay_unfused() -> None:
    cell = rnn.RNNCell(4, 6, bias=False)
    h = cell(rm.randn(2, 4, requires_grad=True))
    assert h.grad_fn is not None and h.grad_fn.name == "tanh"
    xw, hh = rm.randn(2, 6, dtype=rm.float64), rm.randn(2, 6)
    w, b = rm.randn(6, 6, requires_grad=True), rm.randn(6, requires_grad=True)
    y = _functional_rnn.rnn_step(xw, hh, w, b, "tanh")  # promotes as the unfused ops do
    assert y.dtype == rm.float64 and y.grad_fn is not None and y.grad_fn.name == "tanh"


def test_float16_runs_the_composite() -> None:
    cell = rnn.RNNCell(4, 6, dtype=rm.float16)
    h = cell(rm.randn(2, 4, dtype=rm.float16), rm.randn(2, 6, dtype=rm.float16))
    assert h.dtype == rm.float16 and h.grad_fn is not None and h.grad_fn.name == "tanh"


def test_bad_nonlinearity_and_shapes_raise() -> None:
    from rumus_contracts import RumusError, ShapeError
    xw, h, w, b = rm.randn(2, 4), rm.randn(2, 4), rm.randn(4, 4), rm.randn(4)
    with pytest.raises(RumusError, match="'tanh' or 'relu'"):
        op("rnn_cell")(xw, h, w, b, nonlinearity="gelu")
    with pytest.raises(ShapeError, match="square"):
        op("rnn_cell")(xw, h, rm.randn(4, 3), b)
    with pytest.raises(ShapeError, match="does not match h"):
        op("rnn_cell")(rm.randn(3, 4), h, w, b)


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_activation_backward_from_the_output_is_one_op(name: str) -> None:
    x = rm.tensor(np.linspace(-3, 3, 13).astype(np.float32), requires_grad=True)
    y = getattr(rm, name)(x)
    g = rm.tensor(np.random.default_rng(6).standard_normal(13).astype(np.float32))
    seen: list[str] = []
    from rumus import _dispatch
    prev, _dispatch._route_log = _dispatch._route_log, seen  # type: ignore[assignment]
    try:
        y.backward(g)
    finally:
        _dispatch._route_log = prev
    assert [entry[0] for entry in seen] == [f"{name}_backward"]
    yv, gv = y.detach().numpy(), g.numpy()
    # the rounding of the three ops it replaces; PyTorch fuses 1 - y * y into a multiply-add, which near |y| = 1
    # (where 1 - y * y cancels) keeps a few more bits: relative differences up to ~2e-6 there
    want = gv * (np.float32(1) - yv * yv) if name == "tanh" else gv * (yv * (np.float32(1) - yv))
    assert np.array_equal(x.grad.numpy(), want)  # type: ignore[union-attr]
    theirs = getattr(torch.ops.aten, f"{name}_backward")(torch.tensor(gv), torch.tensor(yv))
    np.testing.assert_allclose(x.grad.numpy(), theirs.numpy(), rtol=3e-6, atol=1e-9)  # type: ignore[union-attr]

"""Issue 20 items 1-3 and advanced indexing (issue 12): in-place ops rebase history, views see their
base's in-place changes, item assignment is recorded. Every expected gradient comes from PyTorch
running the same program (or is written out by hand where it is the issue's own example)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm
from rumus_contracts import AutogradError

X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
# float64 where the backend has it; WebGPU (no f64 in WGSL) runs the same programs in float32
DT = "float32" if rm.zeros(1).device.backend == "wgpu" else "float64"
TOL = 1e-5 if DT == "float32" else 1e-12


def _dt(lib: Any) -> Any:
    return getattr(lib, DT)


def _both(program: Callable[[Any, Any], Any], x: Any = X) -> None:
    """Run program(lib, x) under rumus and torch (DT); outputs and x's gradient must agree."""
    xr = rm.tensor(x, dtype=DT, requires_grad=True)
    xt = torch.tensor(x, dtype=_dt(torch), requires_grad=True)
    outr, outt = program(rm, xr), program(torch, xt)
    np.testing.assert_allclose(outr.detach().numpy(), outt.detach().numpy(), rtol=TOL, atol=TOL)
    outr.sum().backward()
    outt.sum().backward()
    gt = xt.grad.numpy() if xt.grad is not None else np.zeros_like(np.asarray(x))
    gr = xr.grad.numpy() if xr.grad is not None else np.zeros_like(np.asarray(x))
    np.testing.assert_allclose(gr, gt, rtol=TOL, atol=TOL)


# ---- 1. every in-place op rebases the tensor's history --------------------------------------------

def test_fill_on_non_leaf_cuts_the_old_history() -> None:
    x = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.fill_(0)
    y.sum().backward()
    assert x.grad is not None and x.grad.tolist() == [0.0, 0.0, 0.0]


def test_copy_of_a_constant_cuts_the_old_history() -> None:
    x = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 5
    y.copy_(rm.zeros(3))
    y.sum().backward()
    assert x.grad is not None and x.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["fill_", "zero_", "copy_", "add_", "sub_", "mul_", "div_", "pow_", "clamp_",
                                  "neg_", "exp_", "sqrt_", "relu_", "copy_grad", "mul_grad", "iadd", "imul"])
def test_every_inplace_op_rebases_like_pytorch(name: str) -> None:
    def program(lib: Any, x: Any) -> Any:
        y = x * 3 - 4
        if name == "fill_":
            y.fill_(2.5)
        elif name == "zero_":
            y.zero_()
        elif name == "copy_":
            y.copy_(lib.ones(2, 3, dtype=_dt(lib)))
        elif name == "copy_grad":
            y.copy_(x * x)
        elif name in ("add_", "sub_", "mul_", "div_", "pow_"):
            getattr(y, name)(2.0)
        elif name == "mul_grad":
            y.mul_(x + 1)  # the other operand needs y's old value for its gradient
        elif name == "clamp_":
            y.clamp_(-1.0, 5.0)
        elif name == "sqrt_":
            y = x * 1
            y.sqrt_()
        elif name == "iadd":
            y += x
        elif name == "imul":
            y *= x
        else:
            getattr(y, name)()
        return y * lib.tensor([[1.0, -2.0, 3.0], [0.5, 1.5, -1.0]], dtype=_dt(lib))
    _both(program)


def test_inplace_on_a_leaf_that_requires_grad_is_refused() -> None:
    w = rm.ones(3, requires_grad=True)
    for act in (lambda: w.add_(1), lambda: w.fill_(0), lambda: w.zero_(), lambda: w.copy_(rm.zeros(3)),
                lambda: w.__setitem__(0, 5.0), lambda: w[0:2].mul_(2)):
        with pytest.raises(AutogradError, match="leaf"):
            act()
    with rm.no_grad():  # the optimizer's way is fine
        w.add_(1)
        w[0] = 7.0
    assert w.tolist() == [7.0, 2.0, 2.0]


def test_saved_tensor_overwritten_later_still_raises() -> None:
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y  # saves y
    y.add_(1)
    with pytest.raises(AutogradError, match="modified by an in-place operation"):
        z.sum().backward()


# ---- 2. views share the version counter and follow their base ---------------------------------------

def test_view_taken_before_an_inplace_op_on_its_base() -> None:
    x = rm.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 1
    v = y[0]
    y.mul_(2)
    (v * v).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [[8.0, 16.0], [0.0, 0.0]]


def test_views_share_the_version_counter() -> None:
    y = rm.zeros(2, 3)
    v, t = y[1], y.T
    assert v._version == t._version == y._version
    v.fill_(1)
    assert v._version == t._version == y._version == 1
    assert v._base is y and t._base is y


@pytest.mark.parametrize("case", range(8))
def test_inplace_on_views_and_stale_views_match_pytorch(case: int) -> None:
    def program(lib: Any, x: Any) -> Any:
        y = x * 2 + 1
        if case == 0:  # write through a row view, read the base
            y[1].mul_(x[0])
            return y
        if case == 1:  # a transposed view written in place; an older view read afterwards
            old = y[:, 1]
            y.t()[0].add_(x[:, 1])
            return y * old.unsqueeze(1)
        if case == 2:  # view of a view
            y[0][1:].exp_()
            return y
        if case == 3:  # two in-place ops, view read between and after
            v = y[1]
            y.mul_(y.detach() + 1)
            w = v * 1
            y[1, 0:2].fill_(3.0)
            return lib.cat([w, v, y.reshape(-1)])
        if case == 4:  # base written while a reshaped view lives
            r = y.reshape(3, 2)
            y.sub_(x * x)
            return r * r
        if case == 5:  # setitem through a view
            v = y[1]
            v[0:2] = x[0, 1:] * 7
            return y * y
        if case == 6:  # in-place on a narrow + clamp
            y.narrow(1, 1, 2).clamp_(0.0, 9.0)
            return y
        z = y.clone()  # copy_ into a view from a tensor needing grad
        z[:, 2].copy_(x[:, 0] * x[:, 1])
        return z * y
    _both(program)


def test_write_through_an_expanded_view_is_refused() -> None:
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    e = y.unsqueeze(0).expand(3, 2)
    with pytest.raises(AutogradError, match="share memory"):
        e.mul_(2)


def test_view_made_under_no_grad_written_in_grad_mode_is_refused() -> None:
    x = rm.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    with rm.no_grad():
        v = y[0:1]
    with pytest.raises(AutogradError, match="no_grad"):
        v.mul_(x[0:1])


# ---- 3. item assignment records the write ----------------------------------------------------------

def test_setitem_with_a_value_that_requires_grad() -> None:
    x = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = rm.zeros(3)
    z[0] = x[0] * 2
    assert z.requires_grad
    (z * z).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [8.0, 0.0, 0.0]


@pytest.mark.parametrize("index", [
    0, -1, slice(0, 2), (1, slice(None)), (slice(None), 2), (Ellipsis, 1), (None, 0),
    "mask", "rows", "pairs", "range_y", "dup",
])
def test_setitem_all_index_kinds_match_pytorch(index: Any) -> None:
    def program(lib: Any, x: Any) -> Any:
        z = lib.zeros(2, 3, dtype=_dt(lib)) + x.detach()
        idx = index
        if index == "mask":
            idx = x.detach() > 2.5
        elif index == "rows":
            idx = lib.tensor([1, 0])
        elif index == "pairs":
            idx = ([0, 1, 1], [2, 0, 1])
        elif index == "range_y":
            idx = (range(2), lib.tensor([2, 0]))
        elif index == "dup":
            idx = lib.tensor([1, 1])
        target_shape = z[idx].shape
        val = (x * x).reshape(-1)[: int(np.prod(target_shape))].reshape(target_shape) if int(
            np.prod(target_shape)) <= 6 else x.sum() * 1
        z[idx] = val * 3
        return z * z
    if index == "dup":  # PyTorch leaves the winner of repeated positions unspecified; numpy: the last
        x = rm.tensor(X, dtype=DT, requires_grad=True)
        z = rm.zeros(2, 3, dtype=DT)
        z[rm.tensor([1, 1])] = x * 3
        np.testing.assert_allclose(z.detach().numpy(), [[0, 0, 0], [12, 15, 18]])
        z.sum().backward()
        assert x.grad is not None and x.grad.tolist() == [[0, 0, 0], [3, 3, 3]]
        return
    _both(program)


def test_setitem_scalar_into_tensor_with_history() -> None:
    _both(lambda lib, x: _set(x * 2, (0, 1), 9.0))


def _set(t: Any, index: Any, value: Any) -> Any:
    t[index] = value
    return t


# ---- 5. advanced indexing reads, with autograd -------------------------------------------------------

@pytest.mark.parametrize("index", [
    "t_rows", [0, 1, 0], (range(2), [2, 0]), "mask", "mask_row", (slice(None), [2, 2, 0]),
    (0, [1, 2]), ([1, 0], 2), (None, [1, 0]), (Ellipsis, [0, 2]), ([[0], [1]], [[0, 1, 2]]), "neg",
    (slice(None), "t_cols"), "scalar_t", "int_and_scalar_t", "empty", "none_mask",
])
def test_advanced_read_matches_pytorch(index: Any) -> None:
    def program(lib: Any, x: Any) -> Any:
        idx: Any = index
        if index == "t_rows":
            idx = lib.tensor([1, 1, 0])
        elif index == "mask":
            idx = x.detach() > 2.5
        elif index == "mask_row":
            idx = lib.tensor([False, True])
        elif index == "neg":
            idx = lib.tensor([-1, -2, -1])
        elif index == "scalar_t":
            idx = lib.tensor(1)
        elif index == "int_and_scalar_t":
            idx = (1, lib.tensor(2))
        elif index == "empty":
            idx = lib.tensor([], dtype=lib.int64)
        elif index == "none_mask":
            idx = x.detach() > 100
        elif isinstance(index, tuple) and "t_cols" in index:
            idx = (slice(None), lib.tensor([[2, 0], [1, 1]]))
        out = x[idx]
        return out * (lib.arange(out.numel(), dtype=_dt(lib)).reshape(out.shape) + 1)
    _both(program)


def test_advanced_read_of_mixed_int_and_list_follows_pytorch_dims() -> None:
    x = rm.zeros(3, 4, 5)
    t = torch.zeros(3, 4, 5)
    for idx in [(0, slice(None), [1, 2]), ([0, 1], slice(None), 0), (slice(None), 0, [1, 2]),
                ([[0, 1]], slice(None), [[1], [2]])]:
        assert x[idx].shape == tuple(t[idx].shape), idx


def test_advanced_index_errors_are_clear() -> None:
    x = rm.zeros(2, 3)
    with pytest.raises(rm.RumusError, match="out of range|out of bounds"):
        x[rm.tensor([0, 5])]
    with pytest.raises(rm.RumusError, match="integer or bool"):
        x[rm.tensor([0.0, 1.0])]
    with pytest.raises(rm.RumusError):
        x[rm.tensor([True, False, True])]  # mask shape does not match
    with pytest.raises(rm.RumusError, match="broadcast"):
        x[[0, 1]] = rm.ones(4)


def test_embedding_style_lookup_and_cross_entropy_pick() -> None:
    w = rm.randn(10, 4, requires_grad=True)
    ids = rm.tensor([3, 3, 7])
    out = w[ids]
    assert out.shape == (3, 4)
    out.sum().backward()
    g = w.grad.numpy()
    assert g[3].tolist() == [2.0] * 4 and g[7].tolist() == [1.0] * 4 and g.sum() == 12.0
    logp = rm.randn(4, 5)
    y = rm.tensor([0, 4, 2, 2])
    np.testing.assert_array_equal(logp[range(4), y].numpy(), logp.numpy()[np.arange(4), y.numpy()])

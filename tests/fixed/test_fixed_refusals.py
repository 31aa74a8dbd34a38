"""Every refusal of SPEC E says "fixed-point": float accessors, gradients, casts, in-place writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm
import rumus.fixed as fx
from rumus_contracts import RumusError, fixed_i16


def _t() -> rm.Tensor:
    return fx.tensor([1, -2, 3, 4], (2, 2), 4)


REFUSALS: dict[str, Callable[[rm.Tensor], Any]] = {
    "numpy()": lambda t: t.numpy(),
    "tolist()": lambda t: t.tolist(),
    "item()": lambda t: t[0, 0].item(),
    "float()": lambda t: float(t[0, 0]),
    "int()": lambda t: int(t[0, 0]),
    "np.asarray": lambda t: np.asarray(t),
    "requires_grad_()": lambda t: t.requires_grad_(),
    "requires_grad_(True)": lambda t: t.requires_grad_(True),
    "cast to float32": lambda t: t.to(rm.float32),
    "cast to float64": lambda t: t.double(),
    "cast to int16": lambda t: t.to(rm.int16),
    "cast to another scale": lambda t: t.to(fixed_i16(3)),
    "cast from float": lambda t: rm.tensor([0.5, 1.5]).to(fixed_i16(4)),
    "tensor(floats, dtype=fixed)": lambda t: rm.tensor([0.5, 1.5], dtype=fixed_i16(4)),
    "Tensor(floats, dtype=fixed)": lambda t: rm.Tensor([0.5], dtype=fixed_i16(4)),
    "fixed.tensor(requires_grad=True)": lambda t: fx.tensor([1], (1,), 4, requires_grad=True),
    "tensor(dtype=fixed, requires_grad=True)": lambda t: rm.tensor([1.0], dtype=fixed_i16(4), requires_grad=True),
    "fixed.tensor(floats)": lambda t: fx.tensor([0.5, 1.5], (2,), 4),
    "add_": lambda t: t.add_(1),
    "+=": lambda t: t.__iadd__(t),
    "sub_": lambda t: t.sub_(1),
    "mul_": lambda t: t.mul_(2),
    "div_": lambda t: t.div_(2),
    "clamp_": lambda t: t.clamp_(0, 1),
    "relu_": lambda t: t.relu_(),
    "neg_": lambda t: t.neg_(),
    "fill_": lambda t: t.fill_(0),
    "zero_": lambda t: t.zero_(),
    "copy_(fixed)": lambda t: t.copy_(_t()),
    "copy_(list)": lambda t: t.copy_([[1, 2], [3, 4]]),
    "setitem": lambda t: t.__setitem__((0, 0), 5),
    "setitem row": lambda t: t.__setitem__(0, _t()[1]),
    "to another device": lambda t: t.to("wgpu"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refused_with_fixed_point_in_the_message(name: str) -> None:
    t = _t()
    before = t.fixed_i16_data().copy()
    with pytest.raises(RumusError, match="fixed-point"):
        REFUSALS[name](t)
    np.testing.assert_array_equal(t.fixed_i16_data(), before)  # nothing was written
    assert not t.requires_grad


def test_fixed_i16_data_is_the_accessor() -> None:
    t = _t()
    data = t.fixed_i16_data()
    assert data.dtype == np.int16 and data.tolist() == [[1, -2], [3, 4]]
    data[0, 0] = 99  # a host copy: the tensor is unchanged
    assert t.fixed_i16_data()[0, 0] == 1
    assert t.T.fixed_i16_data().tolist() == [[1, 3], [-2, 4]]
    with pytest.raises(RumusError, match="fixed-point"):
        rm.tensor([1.0]).fixed_i16_data()


def test_constructor_checks() -> None:
    with pytest.raises(RumusError, match="-32768..32767"):
        fx.tensor([40000], (1,), 4)
    with pytest.raises(RumusError, match="-32768..32767"):
        fx.tensor([2**70], (1,), 4)
    with pytest.raises(RumusError, match="do not fill"):
        fx.tensor([1, 2, 3], (2, 2), 4)
    with pytest.raises(RumusError, match="0..15"):
        fx.tensor([1], (1,), 16)
    t = fx.tensor(np.arange(6, dtype=np.int64), (2, 3), 15)
    assert t.dtype == fixed_i16(15) and t.shape == (2, 3) and t.device == rm.device("cpu")
    assert fx.tensor(7, (), 3).shape == ()
    assert "fixed_i16(15)" in repr(t)


def test_fixed_ops_refuse_float_tensors() -> None:
    with pytest.raises(RumusError, match="fixed-point"):
        fx.relu(rm.tensor([1.0, -1.0]))
    with pytest.raises(RumusError, match="int64"):
        fx.requantize(rm.tensor([1.0]), 3)
    with pytest.raises(RumusError, match="integer"):
        fx.requantize([0.5], 3)

"""Errors name the op the user called and subclass the built-in PyTorch raises (issue 12, "Errors")."""

from __future__ import annotations

import pytest

import rumus as rm
from rumus import nn
from rumus.nn import functional as F


def test_cross_entropy_target_out_of_range_names_the_loss() -> None:
    with pytest.raises(IndexError, match=r"cross_entropy: a target class index is out of range for 4 classes"):
        F.cross_entropy(rm.randn(3, 4), rm.tensor([0, 5, 1]))
    with pytest.raises(IndexError, match=r"nll_loss: a target class index is out of range for 4 classes"):
        F.nll_loss(F.log_softmax(rm.randn(3, 4), dim=1), rm.tensor([0, -3, 1]))


def test_ignore_index_is_still_allowed() -> None:
    loss = F.cross_entropy(rm.randn(3, 4), rm.tensor([0, -100, 1]))
    assert loss.shape == ()


def test_linear_with_the_wrong_input_size_names_linear_and_in_features() -> None:
    with pytest.raises(ValueError, match=r"linear: input of shape \(2, 5\) has 5 features.*in_features=3"):
        nn.Linear(3, 4)(rm.randn(2, 5))


def test_backward_twice_names_no_internal_op() -> None:
    x = rm.randn(3, requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time") as info:
        y.backward()
    assert "squeeze" not in str(info.value) and "op '" not in str(info.value)

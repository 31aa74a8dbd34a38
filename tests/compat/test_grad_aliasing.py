"""A leaf's .grad is its own tensor, as in PyTorch: an in-place change of one gradient (clip_grad_norm_'s mul_,
zero_) never reaches another leaf's gradient, the caller's gradient or a tensor a hook kept. The backward
engine keeps a gradient as it is only when nothing else holds it, and copies it otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import rumus as rm
import rumus.autograd.graph as graph


def _add(lib: Any) -> Any:
    a, b = lib.ones(3, requires_grad=True), lib.ones(3, requires_grad=True)
    (a + b).sum().backward()  # add's backward hands both inputs the same gradient
    a.grad.mul_(2)
    return a.grad.tolist(), b.grad.tolist()


def _cat(lib: Any) -> Any:
    a, b = lib.ones(3, requires_grad=True), lib.ones(2, requires_grad=True)
    lib.cat([a, b]).sum().backward()  # two views of one expanded gradient
    a.grad.mul_(2)
    return a.grad.tolist(), b.grad.tolist()


def _caller_gradient(lib: Any) -> Any:
    x, g = lib.ones(3, requires_grad=True), lib.full((3,), 5.0)
    (x * 1.0).backward(g)
    g.add_(1)
    return x.grad.tolist()


def _leaf_root(lib: Any) -> Any:
    x, g = lib.ones(3, requires_grad=True), lib.full((3,), 5.0)
    x.backward(g)
    g.add_(1)
    return x.grad.tolist()


def _expanded(lib: Any) -> Any:
    a = lib.ones(3, requires_grad=True)
    a.sum().backward()  # sum's backward expands one element
    a.grad.mul_(2)
    return a.grad.tolist()


def _hook_kept(lib: Any) -> Any:
    a, kept = lib.ones(3, requires_grad=True), []
    a.register_hook(lambda g: kept.append(g))
    (a * 2).sum().backward()
    kept[0].mul_(5)
    return a.grad.tolist()


def _create_graph(lib: Any) -> Any:
    a, b = lib.ones(3, requires_grad=True), lib.ones(3, requires_grad=True)
    (a * b).sum().backward(create_graph=True)
    (ga,) = lib.autograd.grad(a.grad.sum(), [b])  # the kept gradient still has its history
    c, d = lib.ones(3, requires_grad=True), lib.ones(3, requires_grad=True)
    (c + d).sum().backward(create_graph=True)
    c.grad.mul_(2)
    return ga.tolist(), c.grad.tolist(), d.grad.tolist()


def _clip(lib: Any) -> Any:
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    v = lib.tensor([1.0, 2.0], requires_grad=True)
    ((w + v) * lib.tensor([1.0, 2.0])).sum().backward()
    lib.nn.utils.clip_grad_norm_([w, v], 1.0)
    return [round(x, 6) for x in w.grad.tolist() + v.grad.tolist()]


CASES: dict[str, Callable[[Any], Any]] = {
    "add": _add, "cat": _cat, "caller gradient": _caller_gradient, "leaf root": _leaf_root, "expanded": _expanded,
    "hook kept": _hook_kept, "create_graph": _create_graph, "clip_grad_norm_": _clip}


@pytest.mark.parametrize("case", CASES)
def test_gradients_are_not_shared_as_in_torch(case: str) -> None:
    with pytest.warns(UserWarning) if case == "create_graph" else _nothing():
        expected = CASES[case](torch)
    assert CASES[case](rm) == expected


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("step", ["mul", "linear", "matmul", "transposed weight"])
def test_a_gradient_nothing_else_holds_is_not_copied(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The other direction of the same check: an interpreter that counts references differently would copy
    # every gradient (correct, slower); this says so.
    copies: list[int] = []
    clone = rm.Tensor.clone
    monkeypatch.setattr(rm.Tensor, "clone", lambda self: copies.append(1) or clone(self))
    w = rm.ones(4, 3, requires_grad=True)
    b = rm.ones(4, requires_grad=True)
    x = rm.ones(2, 3)
    y = {"mul": lambda: w * 2.0, "linear": lambda: rm.nn.functional.linear(x, w, b),  # b's: a reduction's view
         "matmul": lambda: w @ x.mT,
         "transposed weight": lambda: x @ w.mT + b}[step]()  # linear as the GPU backend runs it
    y.sum().backward()
    assert copies == []
    assert w.grad is not None
    assert graph._LOOP_REFS == 4

"""The planned paths against the checked path on random calls: every call runs three times with the planned
paths on (the first call plans, the later ones replay the plan) and once with them off (`_dispatch._run`
only, the reference). Results must be bit-identical (dtype, shape, bytes, requires_grad), gradients too, and
a refused call must raise the same error type with the same message. The calls mix dtypes (promotion),
broadcast shapes, Python numbers, views at offsets and transposed strides, and tensors that require grad."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import _dispatch

DTYPES = ["float32", "float64", "int64", "bool"]
BINARY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("maximum", lambda a, b: rm.maximum(a, b)), ("gt", lambda a, b: a > b),
    ("matmul", lambda a, b: a @ b),
]
UNARY: list[tuple[str, Callable[[Any], Any]]] = [
    ("relu", lambda a: rm.relu(a)), ("tanh", lambda a: rm.tanh(a)), ("exp", lambda a: rm.exp(a)),
    ("neg", lambda a: -a), ("abs", lambda a: abs(a)), ("sum0", lambda a: a.sum(0)), ("sum", lambda a: a.sum()),
]


def _outcome(fn: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        r = fn()
    except Exception as exc:  # the error is the outcome: both paths must raise the same
        return ("error", type(exc), str(exc))
    if isinstance(r, tuple):
        return ("tuple", *(_outcome(lambda t=t: t)[1:] for t in r))
    a = r.detach().numpy()
    return ("ok", r.dtype.name, tuple(r.shape), a.dtype.str, a.tobytes(), r.requires_grad)


def _both(fn: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    planned = [_outcome(fn) for _ in range(3)]
    with monkeypatch.context() as m:
        m.setattr(_dispatch, "_planned_paths", False)
        checked = _outcome(fn)
    for i, got in enumerate(planned):
        assert got == checked, f"call {i} on the planned paths: {got[:3]} != checked {checked[:3]}"


def _tensor(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, grad: bool = False) -> Any:
    if dtype == "bool":
        data: Any = rng.random(shape) > 0.5
    elif dtype == "int64":
        data = rng.integers(-4, 5, shape)
    else:
        data = rng.standard_normal(shape).astype(dtype)
    t = rm.tensor(data)
    if grad and dtype.startswith("float"):
        t.requires_grad_(True)
    return t


def _layout(rng: np.random.Generator, t: Any) -> Any:
    """t as it is, a transposed view, or a slice at an offset (other strides or offsets than the plan's)."""
    k = rng.integers(0, 3)
    if k == 1 and t.ndim >= 2:
        return t.mT.contiguous().mT  # the same values, transposed strides
    if k == 2 and t.ndim >= 1 and t.shape[0] > 0:
        wide = rm.cat([t, t], 0)
        return wide[t.shape[0]:]  # the same values at an offset
    return t


def _shapes(rng: np.random.Generator, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if name == "matmul":
        n, k, m = (int(rng.integers(1, 4)) for _ in range(3))
        k2 = k if rng.random() < 0.85 else k + 1  # sometimes a ShapeError
        return (n, k), (k2, m)
    s = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))
    r = rng.random()
    if r < 0.4:
        return s, s
    if r < 0.6 and s:
        return s, s[1:]  # broadcast a trailing part
    if r < 0.7 and s:
        return s, (1,) * len(s)
    if r < 0.8:
        return s, tuple(x + 1 for x in s) if s else (2,)  # broadcasts or raises
    return s, ()


@pytest.mark.parametrize("seed", range(12))
def test_random_binary_calls_match_the_checked_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        name, f = BINARY[int(rng.integers(len(BINARY)))]
        sa, sb = _shapes(rng, name)
        da, db = (DTYPES[int(rng.integers(len(DTYPES)))] if rng.random() < 0.35 else "float32" for _ in range(2))
        a = _layout(rng, _tensor(rng, sa, da, grad=rng.random() < 0.3))
        b: Any = _layout(rng, _tensor(rng, sb, db))
        if rng.random() < 0.15 and name != "matmul":
            b = [2.5, -1, True, 0.0][int(rng.integers(4))]  # a Python number beside the tensor
        _both(lambda: f(a, b), monkeypatch)  # noqa: B023 - called at once
        if rng.random() < 0.3 and name != "matmul":
            _both(lambda: f(b, a), monkeypatch)  # noqa: B023 - called at once


@pytest.mark.parametrize("seed", range(6))
def test_random_unary_calls_match_the_checked_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(25):
        name, f = UNARY[int(rng.integers(len(UNARY)))]
        shape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0 if name != "sum0" else 1, 3))))
        dtype = DTYPES[int(rng.integers(len(DTYPES)))] if rng.random() < 0.35 else "float32"
        a = _layout(rng, _tensor(rng, shape, dtype, grad=rng.random() < 0.3))
        _both(lambda: f(a), monkeypatch)  # noqa: B023 - called at once


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_give_the_checked_paths_gradients(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small graph built on the planned paths backpropagates the checked path's gradients, bit for bit."""
    rng = np.random.default_rng(200 + seed)
    n, k = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    xs = rng.standard_normal((n, k)).astype("float32")
    ws = rng.standard_normal((k, 3)).astype("float32")
    bs = rng.standard_normal(3).astype("float32")

    def step() -> tuple[Any, ...]:
        x, w, b = rm.tensor(xs, requires_grad=True), rm.tensor(ws, requires_grad=True), rm.tensor(bs)
        h = rm.tanh(x @ w + b)
        loss = (h * h - 0.5 * h).sum() / 3.0
        loss.backward()
        return loss, x.grad, w.grad

    _both(step, monkeypatch)


def test_a_tensor_changed_in_place_still_fails_backward_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> Any:
        w = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x = rm.tensor([0.5, 1.5, -2.0])
        y = w * x  # saves x
        x.add_(1.0)  # a version bump the planned path must not hide
        y.sum().backward()
        return w.grad

    _both(run, monkeypatch)


def test_changing_a_tensors_storage_in_place_replans_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """`.data = ` and Module.to() give a tensor other storage (a layout signature is kept per tensor)."""
    a, b = rm.randn(2, 3), rm.randn(2, 3)
    for _ in range(2):
        a + b
    a.data = rm.randn(3, 2).mT  # the same shape and dtype, transposed strides
    _both(lambda: a + b, monkeypatch)
    p = rm.nn.Linear(3, 2)
    x = rm.randn(4, 3)
    for _ in range(2):
        p(x)
    p.weight.data = rm.randn(3, 2).mT  # linear's kernel takes contiguous inputs only: _run copies this one
    _both(lambda: p(x), monkeypatch)
    p.to(dtype="float64")
    _both(lambda: p(x.double()), monkeypatch)
    _both(lambda: p(x), monkeypatch)  # float32 input, float64 weights: the same error on both paths

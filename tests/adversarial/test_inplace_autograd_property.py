"""Property test (issue 20): random chains of in-place ops, views (taken before and after writes),
advanced-index reads and item assignments (basic and advanced indices) give the gradient that
central finite differences of the same program give, in float64."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumus as rm

SHAPE = (3, 4)

VIEWS = ["self", "row", "col", "block", "t", "t_row", "flat_slice", "row_of_block"]
INPLACE = ["mul_c", "add_c", "mul_x", "sub_x", "fill", "zero", "copy_x", "clamp", "pow2", "div_c", "iadd_x"]
INDICES = ["int", "row_slice", "cell", "ellipsis_col", "mask", "rows", "pairs", "range_cols", "dup_rows",
           "slice_and_list"]


def _view(y: Any, kind: str) -> Any:
    if kind == "self":
        return y
    if kind == "row":
        return y[1]
    if kind == "col":
        return y[:, 2]
    if kind == "block":
        return y[0:2, 1:3]
    if kind == "t":
        return y.t()
    if kind == "t_row":
        return y.t()[3]
    if kind == "flat_slice":
        return y.view(12)[2:9]
    return y[1:3, 0:3][1]  # row_of_block


def _from_x(x: Any, shape: tuple[int, ...], scale: float) -> Any:
    """A tensor of `shape` computed from x (so it carries x's gradient)."""
    n = int(np.prod(shape))
    return (x.reshape(-1)[:n] * scale + 0.75).reshape(shape)


def _index(kind: str, mask: np.ndarray) -> Any:
    return {
        "int": 2, "row_slice": slice(1, 3), "cell": (0, 3), "ellipsis_col": (Ellipsis, 1),
        "mask": rm.tensor(mask), "rows": rm.tensor([2, 0]), "pairs": ([0, 2, 1], [3, 3, 0]),
        "range_cols": (range(3), rm.tensor([1, 0, 3])), "dup_rows": [1, 1, 0],
        "slice_and_list": (slice(0, 2), [3, 1]),
    }[kind]


def _program(x: Any, steps: list[tuple[Any, ...]], mask: np.ndarray, weights: np.ndarray) -> Any:
    y = x * 1.5 + 0.25  # a non-leaf that the steps write into
    kept = []
    for step in steps:
        if step[0] == "keep":
            kept.append(_view(y, step[1]))
        elif step[0] == "read":  # an advanced-index read: a copy of y's current values
            kept.append(y[_index(step[1], mask)])
        elif step[0] == "inplace":
            _, vkind, op, c = step
            t = _view(y, vkind)
            if op == "mul_c":
                t.mul_(c)
            elif op == "add_c":
                t.add_(c)
            elif op == "div_c":
                t.div_(c)
            elif op == "mul_x":
                t.mul_(_from_x(x, t.shape, 0.5))
            elif op == "sub_x":
                t.sub_(_from_x(x, t.shape, c))
            elif op == "iadd_x":
                t += _from_x(x, t.shape, -c)
            elif op == "fill":
                t.fill_(c)
            elif op == "zero":
                t.zero_()
            elif op == "copy_x":
                t.copy_(_from_x(x, t.shape, c))
            elif op == "clamp":
                t.clamp_(-0.6, 0.9)
            else:
                t.pow_(2)
        else:
            _, ikind, use_x, c = step
            idx = _index(ikind, mask)
            target_shape = y[idx].shape
            y[idx] = _from_x(x, target_shape, c) if use_x else c
    loss = (y * rm.tensor(weights)).sum()
    for i, v in enumerate(kept):
        loss = loss + (v * v).sum() * (0.1 * (i + 1))
    return loss


_consts = st.sampled_from([-1.5, -0.5, 0.5, 2.0])
_step = st.one_of(
    st.tuples(st.just("keep"), st.sampled_from(VIEWS)),
    st.tuples(st.just("read"), st.sampled_from(INDICES)),
    st.tuples(st.just("inplace"), st.sampled_from(VIEWS), st.sampled_from(INPLACE), _consts),
    st.tuples(st.just("setitem"), st.sampled_from(INDICES), st.booleans(), _consts),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=6), seed=st.integers(0, 2**16),
       mask_bits=st.lists(st.booleans(), min_size=12, max_size=12))
def test_random_inplace_chains_match_finite_differences(steps: list[tuple[Any, ...]], seed: int,
                                                       mask_bits: list[bool]) -> None:
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-1.0, 1.0, SHAPE)
    weights = rng.uniform(-1.0, 1.0, SHAPE)
    mask = np.array(mask_bits).reshape(SHAPE)

    x = rm.tensor(x0, dtype="float64", requires_grad=True)
    loss = _program(x, steps, mask, weights)
    if not loss.requires_grad:  # every path to x was overwritten by constants
        grad = np.zeros(SHAPE)
    else:
        loss.backward()
        grad = x.grad.numpy() if x.grad is not None else np.zeros(SHAPE)

    eps = 1e-6
    fd = np.zeros(SHAPE)
    with rm.no_grad():
        for i in np.ndindex(*SHAPE):
            hi, lo = x0.copy(), x0.copy()
            hi[i] += eps
            lo[i] -= eps
            f_hi = _program(rm.tensor(hi, dtype="float64"), steps, mask, weights).item()
            f_lo = _program(rm.tensor(lo, dtype="float64"), steps, mask, weights).item()
            fd[i] = (f_hi - f_lo) / (2 * eps)
    scale = max(1.0, float(np.abs(fd).max()))
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * scale, err_msg=f"steps={steps}")

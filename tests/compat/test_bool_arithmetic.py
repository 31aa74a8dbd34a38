"""Arithmetic on bool tensors against torch: + and maximum are logical or, * and minimum logical and (bool
results), square and clamp compute in int64, - and negation raise, mixed with ints or floats they promote."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm

A, B = [True, False, True, False], [True, True, False, False]
CASES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda m, a, b: a + b,
    "mul": lambda m, a, b: a * b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "add bool scalar": lambda m, a, b: a + True,
    "mul bool scalar": lambda m, a, b: a * False,
    "add_ in place": lambda m, a, b: a.add_(b),
    "mul_ in place": lambda m, a, b: a.mul_(b),
    "square": lambda m, a, b: m.square(a),
    "clamp": lambda m, a, b: m.clamp(a, 0, 1),
    "sub": lambda m, a, b: a - b,
    "neg": lambda m, a, b: -a,
    "div": lambda m, a, b: a / (b | True),
    "add int": lambda m, a, b: a + m.tensor([1, 2, 3, 4]),
    "sub int": lambda m, a, b: a - m.tensor([1, 2, 3, 4]),
    "int sub": lambda m, a, b: m.tensor([1.5, 2, 3, 4]) - a,
    "mul float": lambda m, a, b: a * 1.5,
    "sum": lambda m, a, b: a.sum(),
}


def _run(lib: Any, case: str, device: str) -> tuple[str, Any]:
    kw = {"device": device} if lib is rm else {}
    a, b = lib.tensor(A, **kw), lib.tensor(B, **kw)
    try:
        out = CASES[case](lib, a, b)
    except Exception:  # noqa: BLE001 - only whether it raises is compared
        return "error", None
    return str(out.dtype).split(".")[-1], np.asarray(out.tolist())


@pytest.mark.parametrize("case", sorted(CASES))
def test_bool_arithmetic_like_torch(case: str) -> None:
    want_dtype, want = _run(torch, case, "cpu")
    got_dtype, got = _run(rm, case, "cpu")
    assert got_dtype == want_dtype
    if want is not None:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", ["add", "mul", "maximum", "minimum", "square"])
def test_bool_arithmetic_on_wgpu(case: str) -> None:
    from tests.wgpu.wgpu_required import wgpu_or_skip
    wgpu_or_skip()
    want_dtype, want = _run(torch, case, "cpu")
    got_dtype, got = _run(rm, case, "wgpu")
    assert got_dtype == want_dtype
    np.testing.assert_array_equal(got, want)


def test_refusals_say_what_to_use() -> None:
    t = rm.tensor([True, False])
    with pytest.raises(rm.RumusError, match="logical_xor"):
        t - t
    with pytest.raises(rm.RumusError, match="logical_not"):
        t.neg()


@pytest.mark.parametrize("call", ["x.prod()", "lib.prod(x, 1)", "x.prod(0, keepdim=True)", "x.prod(dtype=lib.float32)",
                                  "x.sum()", "lib.sum(x, 0)"])
def test_bool_reductions_count_in_int64(call: str) -> None:
    def run(lib: Any) -> tuple[str, Any]:
        x = lib.tensor([[True, True], [True, False]])
        r = eval(call, {"lib": lib, "x": x})
        return str(r.dtype).split(".")[-1], r.tolist()
    assert run(rm) == run(torch)

"""add / sub with `alpha` against torch: the result (values and dtype), or an error where torch raises (a float
alpha on integer results, a bool alpha on non-bool results)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm

OPERANDS = {"int": [3, -2], "float": [1.5, -0.25], "bool": [True, False]}
SCALARS = {"int scalar": 2, "float scalar": 2.5}
ALPHAS = [1, 2, 1.0, 1.5, True]


def _operand(lib: Any, kind: str) -> Any:
    return SCALARS[kind] if kind in SCALARS else lib.tensor(OPERANDS[kind])


def _run(lib: Any, op: str, a: str, b: str, alpha: Any) -> tuple[str, Any]:
    try:
        out = getattr(lib, op)(_operand(lib, a), _operand(lib, b), alpha=alpha)
    except Exception:  # noqa: BLE001 - only whether it raises is compared
        return "error", None
    return str(out.dtype).split(".")[-1], np.asarray(out.tolist())


@pytest.mark.parametrize(("op", "a", "b", "alpha"),
                         list(itertools.product(("add", "sub"), ("int", "float"), ("int", "float", "int scalar",
                                                                                    "float scalar"), ALPHAS)))
def test_alpha_like_torch(op: str, a: str, b: str, alpha: Any) -> None:
    want_dtype, want = _run(torch, op, a, b, alpha)
    got_dtype, got = _run(rm, op, a, b, alpha)
    assert got_dtype == want_dtype
    if want is not None:
        np.testing.assert_allclose(got, want)

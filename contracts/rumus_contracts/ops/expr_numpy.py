"""numpy renderer of the expression table: float64 evaluation of an expression.

Serves as the reference of the fused backward ops (`g * derivative`); the derivative itself is
proven by the forward op's gradient check against finite differences of its hand-written reference.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from collections.abc import Callable
from typing import Any

import numpy as np

from .expr_lang import python_function
from .expressions import Expr

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": _erf, "phi": lambda x: 0.5 * _erfc(-x / math.sqrt(2.0)),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "abs": np.abs, "pow": np.power,
    "fmod": np.fmod, "atan2": np.arctan2, "max": np.maximum, "min": np.minimum, "isnan": np.isnan,
    "isinf": np.isinf, "isfinite": np.isfinite, "truthy": lambda x: np.asarray(x) != 0,
}


# the expression language's primitives in numpy (see expr_lang.PythonRenderer)
_NUMPY = SimpleNamespace(
    add=np.add, sub=np.subtract, mul=np.multiply, div=np.divide, floor_divide=np.floor_divide,
    remainder=np.remainder, neg=np.negative, lt=np.less, le=np.less_equal, gt=np.greater, ge=np.greater_equal,
    eq=np.equal, ne=np.not_equal, where=np.where, logical_and=np.logical_and, logical_or=np.logical_or,
    logical_not=np.logical_not, const=float, fn=FUNCTIONS, result=lambda r: np.asarray(r, dtype=np.float64),
)


def evaluator(e: Expr, dtype: Any = np.float64) -> Callable[..., Any]:
    """fn(*input arrays, **params) -> array: the expression evaluated by numpy, its constants and its
    result in `dtype` (float64, the references' precision, unless asked otherwise: an integer dtype
    evaluates integer ops exactly, with no detour through float64)."""
    if np.dtype(dtype) == np.float64:
        return python_function(e, lambda *inputs: _NUMPY)
    scalar = np.dtype(dtype).type
    typed = SimpleNamespace(**{**vars(_NUMPY), "const": scalar, "result": lambda r: np.asarray(r, dtype=dtype)})
    return python_function(e, lambda *inputs: typed)

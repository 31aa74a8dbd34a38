"""numpy renderer of the expression table: float64 evaluation of an expression.

Serves as the reference of the fused backward ops (`g * derivative`); the derivative itself is
proven by the forward op's gradient check against finite differences of its hand-written reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .expr_lang import Renderer
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


class NumpyRenderer(Renderer):
    def const(self, v: float) -> str: return repr(v)
    def neg(self, a: str) -> str: return f"(-{a})"

    def binop(self, op: str, a: str, b: str) -> str:
        return {"//": f"np.floor_divide({a}, {b})", "%": f"np.remainder({a}, {b})"}.get(op, f"({a} {op} {b})")

    def cmp(self, op: str, a: str, b: str) -> str: return f"({a} {op} {b})"
    def bool_cmp(self, op: str, a: str, b: str) -> str: return f"({a} {op} {b})"
    def logic(self, op: str, a: str, b: str) -> str: return f"np.logical_{op}({a}, {b})"
    def not_(self, a: str) -> str: return f"np.logical_not({a})"
    def select(self, c: str, a: str, b: str) -> str: return f"np.where({c}, {a}, {b})"
    def call(self, fn: str, args: list[str]) -> str: return f"F[{fn!r}]({', '.join(args)})"


def evaluator(e: Expr) -> Callable[..., Any]:
    """fn(*input arrays, **params) -> float64 array: the expression evaluated by numpy."""
    lets, (res, _) = NumpyRenderer().render(e.body, {n: n for n in (*e.inputs, *e.params)})
    lines = [f"    {n} = {v}" for n, v, _ in lets] + [f"    return np.asarray({res}, dtype=np.float64)"]
    args = ", ".join([*e.inputs, *(f"{p}={d!r}" for p, d in e.params.items())])
    namespace: dict[str, Any] = {"np": np, "F": FUNCTIONS}
    exec(f"def fn({args}):\n" + "\n".join(lines), namespace)  # our own table's text, never user input
    fn: Callable[..., Any] = namespace["fn"]
    return fn

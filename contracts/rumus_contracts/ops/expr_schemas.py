"""Schema pieces derived from the expression table: dtype groups, attributes, fused backward ops.

The forward ops' schemas (with their hand-written float64 references and samples) live in
elementwise.py and activation.py and take dtypes and attribute defaults from here; the fused backward
ops are registered here, wholly from the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtype import DType, parse_dtype
from ..schema import OpRegistry, OpSchema, Sample
from ..shapes import elementwise
from ._common import BINARY_SHAPES, UNARY_SHAPES, Domain
from .expr_c import GROUPS
from .expr_numpy import evaluator
from .expressions import EXPRESSIONS, backward_ops


def dtypes(op: str) -> tuple[DType, ...]:
    return tuple(parse_dtype(name) for name in GROUPS[EXPRESSIONS[op].dtypes])


def attrs(op: str) -> dict[str, Any]:
    return dict(EXPRESSIONS[op].params)


def differentiable(op: str) -> tuple[str, ...]:
    """Schema input names gradients flow to: every input of an op with a same-dtype result (the
    derivative is the table's `grad`, or a formula in the core's formulas.py for the first ops)."""
    e = EXPRESSIONS[op]
    if e.result != "same":
        return ()
    return ("x",) if len(e.inputs) == 1 else ("a", "b")


def _backward_samples(domains: dict[str, Domain], binary: bool,
                      attr_sets: tuple[dict[str, Any], ...]) -> Callable[[np.random.Generator], list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for a in attr_sets:
            if binary:
                for sa, sb in BINARY_SHAPES:
                    shape = np.broadcast_shapes(sa, sb)
                    out.append(Sample([rng.uniform(-2, 2, shape), domains["x"](rng, sa), domains["y"](rng, sb)],
                                      dict(a), name=f"{sa}x{sb}{a or ''}"))
            else:
                out += [Sample([rng.uniform(-2, 2, s), domains["x"](rng, s)], dict(a), name=f"{s}{a or ''}")
                        for s in UNARY_SHAPES]
        return out
    return gen


def _activation_outputs(rng: np.random.Generator, shape: Any) -> np.ndarray:
    """Outputs of tanh and sigmoid: the open interval (-1, 1) holds both ranges' insides."""
    out: np.ndarray = rng.uniform(-0.99, 0.99, shape)
    return out


def register_backward(registry: OpRegistry, op: str, domains: dict[str, Domain],
                      attr_sets: tuple[dict[str, Any], ...] = ({},)) -> None:
    """Register the fused backward ops of `op`, sampled on the forward op's input domains."""
    for name, (fwd, wrt, e) in backward_ops().items():
        if fwd != op:
            continue
        binary = len(e.inputs) == 3
        from_output = e.inputs == ("g", "y")  # tanh_backward(grad, out): the derivative in the result
        ins = ("grad", "a", "b") if binary else ("grad", "out") if from_output else ("grad", "x")
        registry.register(OpSchema(
            name, ins, elementwise(name), attrs=dict(e.params), broadcast=True,
            dtypes=tuple(parse_dtype(n) for n in GROUPS[e.dtypes]),
            differentiable=("grad",), reference=evaluator(e),
            samples=_backward_samples({"x": _activation_outputs} if from_output else domains, binary, attr_sets),
            doc=f"grad * d{op}/d{'x from its output' if from_output else wrt}: the fused backward of {op} "
                f"(differentiable in grad only)"))

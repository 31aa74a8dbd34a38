"""The fused backward ops of the expression table (`<op>_backward`, `<op>_backward_a/_b`: g times the
derivative) evaluated with the table's forward ops: the same expression the backward formulas compose
where a backend has no fused kernel (rumus.autograd.formulas_table.core_evaluator), in float32 for
float16/bfloat16 inputs. So the fused backward ops are an optimisation, not primitives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rumus_contracts.ops.expressions import Expr, backward_ops

from .._tensor_base import Tensor
from ..autograd.formulas_table import core_evaluator
from . import register
from ._helpers import in_float32


def _evaluated(expr: Expr) -> Callable[..., Any]:
    """The expression's evaluator, built on first use (import stays cheap: most backends never need it)."""
    built: list[Callable[..., Any]] = []

    def run(*tensors: Tensor, **attrs: Any) -> Any:
        if not built:
            built.append(in_float32(core_evaluator(expr)))
        return built[0](*tensors, **attrs)
    return run


for _name, (_forward, _wrt, _expr) in backward_ops().items():
    register(_name)(_evaluated(_expr))

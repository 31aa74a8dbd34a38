"""The fused backward ops of the expression table (`<op>_backward`, `<op>_backward_a/_b`: g times the
derivative) evaluated with the table's forward ops: the same expression the backward formulas compose
where a backend has no fused kernel (rumus.autograd.formulas_table.core_evaluator), in float32 for
float16/bfloat16 inputs. So the fused backward ops are an optimisation, not primitives."""

from __future__ import annotations

from rumus_contracts.ops.expressions import backward_ops

from ..autograd.formulas_table import core_evaluator
from . import register
from ._helpers import in_float32

for _name, (_forward, _wrt, _expr) in backward_ops().items():
    register(_name)(in_float32(core_evaluator(_expr)))

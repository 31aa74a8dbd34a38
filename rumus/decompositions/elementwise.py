"""The fused backward ops of the expression table (`<op>_backward`, `<op>_backward_a/_b`: g times the
derivative) evaluated with the table's forward ops: the same expression the backward formulas compose
where a backend has no fused kernel (rumus.autograd.formulas_table.core_evaluator). So the fused backward
ops are an optimisation, not primitives."""

from __future__ import annotations

from rumus_contracts.ops.expressions import backward_ops

from ..autograd.formulas_table import core_evaluator
from . import register

for _name, (_forward, _wrt, _expr) in backward_ops().items():
    register(_name)(core_evaluator(_expr))

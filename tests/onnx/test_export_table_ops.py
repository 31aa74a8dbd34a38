"""Every elementwise op of the expression table exports to ONNX: ops without a hand-written lowering get
one rendered from their expression (contracts/rumus_contracts/onnx_lowering/expr_onnx.py), checked
against onnxruntime and read back by rm.onnx.load."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _helpers import export_and_compare

import rumus as rm
from rumus import nn
from rumus_contracts.ops.expressions import EXPRESSIONS

RNG = np.random.default_rng(1)
FLOAT_OPS = sorted(op for op, e in EXPRESSIONS.items() if e.result == "same" and e.dtypes != "bool")


class _Op(nn.Module):
    def __init__(self, op: str, arity: int) -> None:
        super().__init__()
        self.op, self.arity = op, arity

    def forward(self, x: Any) -> Any:
        fn = getattr(rm.ops, self.op)
        # the second operand is a function of x (one graph input), away from zero for //, % and fmod
        return fn(x) if self.arity == 1 else fn(x, x * 0.5 + 1.25)


def _inputs(b: int, t: int) -> list[np.ndarray]:
    # positive (log, sqrt, pow stay real), with both signs of fractional parts for rounding ops
    return [RNG.uniform(0.3, 2.7, (b, 5)).astype(np.float32)]


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_table_op_matches_onnxruntime(op: str, tmp_path: Any) -> None:
    e = EXPRESSIONS[op]
    if "float32" not in _dtype_names(e.dtypes):
        pytest.skip(f"{op} has no float32 form")
    export_and_compare(_Op(op, len(e.inputs)), _inputs, tmp_path / f"{op}.onnx", {"x": {0: "batch"}},
                       [(3, 1), (6, 1)])


def test_negative_inputs_of_python_rule_ops(tmp_path: Any) -> None:
    # // and % follow Python's floor rule for negative operands in ONNX too
    def make(b: int, t: int) -> list[np.ndarray]:
        return [RNG.uniform(-3.0, 3.0, (b, 5)).astype(np.float32)]
    for op in ("floor_divide", "remainder", "fmod", "trunc", "sign"):
        if op in EXPRESSIONS:
            export_and_compare(_Op(op, len(EXPRESSIONS[op].inputs)), make, tmp_path / f"neg_{op}.onnx",
                               {"x": {0: "batch"}}, [(4, 1)])


def _dtype_names(group: str) -> tuple[str, ...]:
    from rumus_contracts.ops.expr_c import GROUPS
    return tuple(GROUPS[group])

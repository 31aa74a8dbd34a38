"""ONNX lowerings of the core's ops, declared next to their schemas (DESIGN.md section 8).

A lowering turns one dispatched op into ONNX node descriptions. It is a plain function

    lower(ctx, inputs, outputs, attrs) -> list[OnnxNode]

over value *names* (strings): `inputs` name the op's tensor inputs in schema order, `outputs` the names
its results must be written to. `ctx` (a `LoweringContext`, implemented by `rumus.onnx`) knows the
shapes and dtypes of this call and makes constants. Nothing here imports the `onnx` package (an optional
extra): the exporter turns the descriptions into protobuf.

A plugin's op gets exported by setting `OpSchema.onnx` to such a function; an op without one fails the
export with an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..dtype import DType
from ..errors import RumusError
from ..schema import OpRegistry


class OnnxExportError(RumusError):
    """The model (or one of its ops) cannot be expressed in ONNX."""


@dataclass(frozen=True)
class OnnxNode:
    """One ONNX node: op_type (ai.onnx domain unless `domain` says otherwise), value names, attributes."""

    op_type: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    domain: str = ""


class LoweringContext(Protocol):
    """What a lowering may ask about the call it lowers."""

    op: str  # the op's name, for error messages
    opset: int
    input_shapes: Sequence[tuple[int, ...]]
    output_shapes: Sequence[tuple[int, ...]]
    input_dtypes: Sequence[DType]
    output_dtypes: Sequence[DType]

    def const(self, value: Any, dtype: DType | str) -> str:
        """An initializer holding `value` (numpy-convertible) as `dtype`; returns its name."""
        ...

    def fresh(self, hint: str) -> str:
        """A new unique value name for an intermediate result."""
        ...

    def shape_tensor(self, shape: Sequence[int]) -> str:
        """A 1-D int64 value holding `shape`, computed at run time where a dim follows a dynamic axis."""
        ...


Lowering = Callable[[LoweringContext, Sequence[str], Sequence[str], Mapping[str, Any]], list[OnnxNode]]

# TensorProto.DataType codes (stable across onnx versions), by rumus dtype name.
ONNX_DTYPE: dict[str, int] = {
    "float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7, "bool": 9, "float16": 10,
    "float64": 11, "bfloat16": 16,
}


def onnx_dtype(dtype: DType | str) -> int:
    name = dtype if isinstance(dtype, str) else dtype.name
    try:
        return ONNX_DTYPE[name]
    except KeyError:
        what = "fixed-point tensors have no ONNX form" if name.startswith("fixed") else "no ONNX equivalent"
        raise OnnxExportError(f"dtype {name} cannot be exported to ONNX ({what})") from None


def axes(ctx: LoweringContext, dims: Sequence[int]) -> str:
    """An int64 axes input (opset >= 13/18 ops take axes as a tensor)."""
    return ctx.const(np.asarray(list(dims), dtype=np.int64), "int64")


def one(op_type: str, **attrs: Any) -> Lowering:
    """The lowering of an op that is exactly one ONNX node with fixed attributes."""
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        return [OnnxNode(op_type, list(ins), list(outs), dict(attrs))]
    return lower


def attach_onnx_lowerings(registry: OpRegistry) -> None:
    """Give every core op that has a lowering its `schema.onnx` (ops already carrying one keep it)."""
    from . import activation, elementwise, linalg, nn, nn_conv, nn_norm, reduction
    table: dict[str, Lowering] = {}
    for module in (elementwise, activation, reduction, linalg, nn, nn_conv, nn_norm):
        table.update(module.LOWERINGS)
    # every other elementwise op: its expression in ops/expressions.py rendered as ONNX nodes (op-once)
    from ..ops.expressions import EXPRESSIONS
    from .expr_onnx import table_lowering
    for name, expr in EXPRESSIONS.items():
        table.setdefault(name, table_lowering(name, expr))
    for name, lowering in table.items():
        if name in registry:
            schema = registry.get(name)
            if schema.onnx is None:
                schema.onnx = lowering

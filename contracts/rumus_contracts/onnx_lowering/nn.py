"""ONNX lowerings of embedding, gather/index_select/scatter_add and dropout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import Lowering, LoweringContext, OnnxExportError, OnnxNode


def _embedding(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("Gather", [ins[0], ins[1]], list(outs), {"axis": 0})]  # padding_idx only affects grads


def _gather(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("GatherElements", [ins[0], ins[1]], list(outs), {"axis": int(a["dim"])})]


def _index_select(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str],
                  a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("Gather", [ins[0], ins[1]], list(outs), {"axis": int(a["dim"])})]


def _scatter_add(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str],
                 a: Mapping[str, Any]) -> list[OnnxNode]:
    if ctx.input_shapes[1] != ctx.input_shapes[2]:
        raise OnnxExportError(f"scatter_add: index {ctx.input_shapes[1]} and src {ctx.input_shapes[2]} differ in "
                              f"shape; ONNX ScatterElements needs them equal (slice src first)")
    return [OnnxNode("ScatterElements", list(ins), list(outs), {"axis": int(a["dim"]), "reduction": "add"})]


def _dropout(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    if float(a["p"]) != 0.0:
        raise OnnxExportError(f"dropout with p={a['p']} ran while tracing: the model is in training mode; call "
                              f"model.eval() before exporting (ONNX graphs are for inference)")
    return [OnnxNode("Identity", [ins[0]], list(outs))]


LOWERINGS: dict[str, Lowering] = {
    "embedding": _embedding, "gather": _gather, "index_select": _index_select, "scatter_add": _scatter_add,
    "dropout": _dropout,
}

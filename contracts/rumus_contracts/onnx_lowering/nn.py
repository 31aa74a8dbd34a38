"""ONNX lowerings of embedding, gather/index_select/index_add/scatter_add, argsort and dropout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import Lowering, LoweringContext, OnnxExportError, OnnxNode


def _embedding(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("Gather", [ins[0], ins[1]], list(outs), {"axis": 0})]  # padding_idx only affects grads


def _gather(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    return [OnnxNode("GatherElements", [ins[0], ins[1]], list(outs), {"axis": int(a["dim"])})]


def _index_select(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str],
                  a: Mapping[str, Any]) -> list[OnnxNode]:
    if ctx.input_shapes[1]:
        return [OnnxNode("Gather", [ins[0], ins[1]], list(outs), {"axis": int(a["dim"])})]
    # a 0-d index keeps the dim (length 1), where Gather with a scalar index would drop it
    one = ctx.fresh("index_1d")
    return [OnnxNode("Reshape", [ins[1], ctx.const(np.asarray([1], dtype=np.int64), "int64")], [one]),
            OnnxNode("Gather", [ins[0], one], list(outs), {"axis": int(a["dim"])})]


def _index_add(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    """x with alpha * source's slices added at index along dim: ScatterND(reduction="add") over dim brought to
    the front (repeated indices add up, as in the op)."""
    nd, dim, alpha = len(ctx.input_shapes[0]), int(a["dim"]), float(a["alpha"])
    x, index, src = ins
    nodes: list[OnnxNode] = []
    if ctx.input_dtypes[1].name != "int64":
        nodes.append(OnnxNode("Cast", [index], [cast := ctx.fresh("index64")], {"to": 7}))  # INT64
        index = cast
    rows = ctx.fresh("index_rows")
    nodes.append(OnnxNode("Reshape", [index, ctx.const(np.asarray([-1, 1], dtype=np.int64), "int64")], [rows]))
    if alpha != 1.0:
        nodes.append(OnnxNode("Mul", [src, ctx.const(alpha, ctx.input_dtypes[2])], [scaled := ctx.fresh("scaled")]))
        src = scaled
    if dim == 0 or nd < 2:
        return nodes + [OnnxNode("ScatterND", [x, rows, src], list(outs), {"reduction": "add"})]
    perm = [dim, *[d for d in range(nd) if d != dim]]
    back = [perm.index(d) for d in range(nd)]
    xt, st, added = ctx.fresh("front"), ctx.fresh("src_front"), ctx.fresh("added")
    return nodes + [OnnxNode("Transpose", [x], [xt], {"perm": perm}),
                    OnnxNode("Transpose", [src], [st], {"perm": perm}),
                    OnnxNode("ScatterND", [xt, rows, st], [added], {"reduction": "add"}),
                    OnnxNode("Transpose", [added], list(outs), {"perm": back})]


def _argsort(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
    """TopK over the whole dim: its ties keep the lower index first (ONNX's rule), as a stable sort does."""
    if not ctx.input_shapes[0]:
        return [OnnxNode("Identity", [ctx.const(0, "int64")], list(outs))]
    dim = int(a["dim"]) % len(ctx.input_shapes[0])
    shape, k, values = ctx.fresh("sort_shape"), ctx.fresh("sort_k"), ctx.fresh("sorted")
    return [OnnxNode("Shape", [ins[0]], [shape], {"start": dim, "end": dim + 1}),
            OnnxNode("Identity", [shape], [k]),
            OnnxNode("TopK", [ins[0], k], [values, outs[0]],
                     {"axis": dim, "largest": int(bool(a["descending"])), "sorted": 1})]


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
    "dropout": _dropout, "argsort": _argsort, "index_add": _index_add,
}

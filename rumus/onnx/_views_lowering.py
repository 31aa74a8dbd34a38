"""ONNX lowerings of the core's views (they are metadata, not dispatched ops, so they live here).

Shapes given to Reshape / Expand follow dynamic axes (`Tracer.shape_tensor`); a reshape that merges
dynamic dims into one (e.g. [B, T, C] -> [B*T, C]) leaves that dim to ONNX as -1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rumus_contracts.onnx_lowering import OnnxExportError, OnnxNode

if TYPE_CHECKING:
    from ._trace import Tracer

INT64_MAX = 2**63 - 1


def lower_view(tr: Tracer, name: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
               attrs: Mapping[str, Any], src: str, dst: str) -> list[OnnxNode]:
    if name == "permute":
        return [OnnxNode("Transpose", [src], [dst], {"perm": [int(d) for d in attrs["dims"]]})]
    if name == "expand":
        return [OnnxNode("Expand", [src, tr.shape_tensor(out_shape)], [dst])]
    if name == "getitem":
        return _getitem(tr, in_shape, attrs["index"], src, dst)
    if name in ("view", "reshape", "squeeze", "unsqueeze"):
        return [OnnxNode("Reshape", [src, _reshape_target(tr, in_shape, out_shape)], [dst])]
    raise OnnxExportError(f"view '{name}' has no ONNX lowering")


def _symbol_sizes(tr: Tracer, shape: Sequence[int]) -> list[int]:
    return sorted(d for d in shape if d in tr.symbols)


def _reshape_target(tr: Tracer, in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> str:
    if any(tr.is_sym(d) for d in out_shape):  # sizes computed from the inputs' shapes: the target is exact
        return tr.shape_tensor(out_shape)
    missing = list(_symbol_sizes(tr, in_shape))
    for d in _symbol_sizes(tr, out_shape):
        if d in missing:
            missing.remove(d)
    if not missing:
        return tr.shape_tensor(out_shape)
    # dynamic dims merged away: the one output dim that holds their product becomes -1
    prod = int(np.prod(missing))
    for i, d in enumerate(out_shape):
        if d not in tr.symbols and d % prod == 0 and d:
            return tr.shape_tensor(out_shape, wildcard=i)
    raise OnnxExportError(f"reshape {in_shape} -> {out_shape}: cannot tell which output dim holds the dynamic dims of "
                          f"sizes {missing}; export with static shapes or other example sizes")


def _getitem(tr: Tracer, in_shape: tuple[int, ...], index: Any, src: str, dst: str) -> list[OnnxNode]:
    items = index if isinstance(index, tuple) else (index,)
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if Ellipsis in items:
        pos = items.index(Ellipsis)
        items = items[:pos] + (slice(None),) * (len(in_shape) - consumed) + items[pos + 1:]
    starts: list[int] = []
    ends: list[int] = []
    axes: list[int] = []
    steps: list[int] = []
    squeeze: list[int] = []
    unsqueeze: list[int] = []
    d = 0  # dim of the input
    out_d = 0  # dim of the output
    for item in items:
        if item is None:
            unsqueeze.append(out_d)
            out_d += 1
            continue
        if isinstance(item, slice):
            start = 0 if item.start is None else _bound(tr, item.start)
            stop = INT64_MAX if item.stop is None else _bound(tr, item.stop)
            step = 1 if item.step is None else int(item.step)
            whole = stop is in_shape[d] or not tr.is_sym(stop) and stop >= in_shape[d]
            if not (start == 0 and step == 1 and whole):
                starts.append(start)
                ends.append(stop)
                axes.append(d)
                steps.append(step)
            out_d += 1
        else:  # an int: a one-wide slice, squeezed afterwards (negative ints count from the end)
            i = item if tr.is_sym(item) else int(item.__index__())
            starts.append(i)
            ends.append(i + 1 if tr.is_sym(i) or i != -1 else INT64_MAX)
            axes.append(d)
            steps.append(1)
            squeeze.append(d)
        d += 1
    nodes: list[OnnxNode] = []
    cur = src
    if axes:
        out = tr.fresh("slice")
        i64 = np.int64
        nodes.append(OnnxNode("Slice", [cur, _starts(tr, starts), _ends(tr, ends),
                                        tr.const(np.asarray(axes, dtype=i64), "int64"),
                                        tr.const(np.asarray(steps, dtype=i64), "int64")], [out]))
        cur = out
    if squeeze:
        out = tr.fresh("squeeze")
        nodes.append(OnnxNode("Squeeze", [cur, tr.const(np.asarray(squeeze, dtype=np.int64), "int64")], [out]))
        cur = out
    if unsqueeze:
        out = tr.fresh("unsqueeze")
        nodes.append(OnnxNode("Unsqueeze", [cur, tr.const(np.asarray(unsqueeze, dtype=np.int64), "int64")], [out]))
        cur = out
    nodes.append(OnnxNode("Identity", [cur], [dst]))
    return nodes


def _bound(tr: Tracer, v: Any) -> int:
    return v if tr.is_sym(v) else int(v)


def _starts(tr: Tracer, starts: list[int]) -> str:
    """Slice starts; computed sizes (x[:, S - 1:]) are computed in the graph too."""
    if not any(tr.is_sym(s) for s in starts):
        return tr.const(np.asarray(starts, dtype=np.int64), "int64")
    return _concat(tr, [tr.size_value(s) if tr.is_sym(s) else tr.const(np.asarray([s], dtype=np.int64), "int64")
                        for s in starts], "starts")


def _ends(tr: Tracer, ends: list[int]) -> str:
    """Slice ends; an end equal to a dynamic axis's size (x[:T]) or computed from one follows that axis."""
    if not any(tr.is_dynamic(e) for e in ends):
        return tr.const(np.asarray(ends, dtype=np.int64), "int64")
    exact = any(tr.is_sym(e) for e in ends)  # SymInts present: the plain ends are static
    dynamic = tr.is_sym if exact else tr.is_dynamic
    parts = [tr.size_value(e) if dynamic(e) else tr.const(np.asarray([int(e)], dtype=np.int64), "int64")
             for e in ends]
    return _concat(tr, parts, "ends")


def _concat(tr: Tracer, parts: list[str], hint: str) -> str:
    if len(parts) == 1:
        return parts[0]
    out = tr.fresh(hint)
    tr.nodes.append(OnnxNode("Concat", parts, [out], {"axis": 0}))
    return out

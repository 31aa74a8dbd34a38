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
        # a 0 in Reshape's target copies the input's dim unless allowzero says it is a length (empty tensors)
        empty = {"allowzero": 1} if any(not tr.is_dynamic(d) and int(d) == 0 for d in out_shape) else {}
        return [OnnxNode("Reshape", [src, _reshape_target(tr, in_shape, out_shape)], [dst], empty)]
    if "positions" in attrs:  # a strided view (unfold, as_strided, diagonal): a Gather of the flat input
        return _strided(tr, name, in_shape, out_shape, np.asarray(attrs["positions"]), src, dst)
    raise OnnxExportError(f"view '{name}' has no ONNX lowering")


def _strided(tr: Tracer, name: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...], positions: np.ndarray,
             src: str, dst: str) -> list[OnnxNode]:
    if name == "unfold":
        windows = _unfold_windows(in_shape, out_shape, positions)
        if windows is not None:
            return _unfold(tr, in_shape, *windows, src, dst)
    dynamic = [d for d in (*in_shape, *out_shape) if tr.is_dynamic(d)]
    if dynamic:
        raise OnnxExportError(f"view '{name}' of a tensor of shape {tuple(int(d) for d in in_shape)} picks elements "
                              f"at positions computed for that shape, and a dim of it follows a dynamic axis "
                              f"({int(dynamic[0])}); export with that axis static, or use ops that ONNX has "
                              f"(slicing, reshape, permute, pooling) instead of '{name}'")
    flat = tr.fresh(f"{name}_flat")
    return [OnnxNode("Reshape", [src, tr.const(np.asarray([-1], dtype=np.int64), "int64")], [flat]),
            OnnxNode("Gather", [flat, tr.const(positions.reshape(out_shape).astype(np.int64), "int64")], [dst],
                     {"axis": 0})]


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


def _unfold_windows(in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                    positions: np.ndarray) -> tuple[int, int, int] | None:
    """(dim, size, step) of x.unfold(dim, size, step), found from the shapes and checked against the view's
    positions (so the lowering is exactly the view the trace saw)."""
    size = int(out_shape[-1])
    flat = np.arange(int(np.prod([int(d) for d in in_shape])), dtype=np.int64).reshape([int(d) for d in in_shape])
    for d in range(len(in_shape)):
        if tuple(out_shape[:d]) != tuple(in_shape[:d]) or tuple(out_shape[d + 1:-1]) != tuple(in_shape[d + 1:]):
            continue
        count = int(out_shape[d])
        for step in range(1, int(in_shape[d]) + 1):
            if (count - 1) * step + size > int(in_shape[d]) or step > 1 and count == 1:
                continue
            grid = (np.arange(count)[:, None] * step + np.arange(size)[None, :])
            want = np.moveaxis(np.take(flat, grid, axis=d), d + 1, -1)
            if want.size == positions.size and np.array_equal(want.reshape(-1), positions.reshape(-1)):
                return d, size, step
    return None


def _unfold(tr: Tracer, in_shape: tuple[int, ...], dim: int, size: int, step: int, src: str,
            dst: str) -> list[OnnxNode]:
    """x.unfold(dim, size, step) as a Gather of the [count, size] window grid along dim (a static dim; the others
    may be dynamic), with the window axis moved last."""
    if tr.is_dynamic(in_shape[dim]):
        raise OnnxExportError(f"unfold over dim {dim}, which follows a dynamic axis: the windows are counted at the "
                              f"example size ({int(in_shape[dim])}); export with that axis static")
    count = (int(in_shape[dim]) - size) // step + 1
    grid = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]
    picked = tr.fresh("unfold_windows")
    nd = len(in_shape)
    perm = [*range(dim + 1), *range(dim + 2, nd + 1), dim + 1]
    return [OnnxNode("Gather", [src, tr.const(grid, "int64")], [picked], {"axis": dim}),
            OnnxNode("Transpose", [picked], [dst], {"perm": perm})]

"""Group and batch normalization, and the backward ops of layer, RMS, group and batch norm
(shaders/nn_norm.wgsl; layer and RMS norm forward are row ops of the row-op table: softmax.py).

Group norm forward is a row op of the table over (sample, group) rows, its weight and bias grouped
columns (softmax.launch's column_groups). The layer / RMS / group norm backward ops take two steps: rows
(gx, and each row's mean / rstd into a scratch buffer), a row op too (the table's entry of the backward
op's name where the row shader holds it, else row_wgsl.NORM_DX), then the weight / bias gradients: a
group of invocations per parameter for group norm (`param_grads`), and for layer / RMS norm column sums
over the rows (`param_columns`: coalesced reads, the rows split over the grid, then each column's splits
folded in order, so the result is deterministic). Reductions of the group kernels run in power-of-two
groups of invocations (about 8 elements each, up to 256; several groups a workgroup), summing in
workgroup memory (shaders/row_group.wgsl's entry). Batch norm's statistics and backward run a group per
channel; its forward is elementwise. Inputs are contiguous (the schemas say so), with offsets.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.row_ops import ROW_OPS, RowOp, split_lets
from rumus_contracts.ops.row_wgsl import NORM_DX, row_shader

from .layout import dealias, device_of, new_buffer
from .nn_common import dispatch
from .reduce import COLUMN_MIN_ROWS, COLUMN_THREADS
from .softmax import launch, layouts, planned

BIAS, TRAINING = 2, 4  # nn_norm.wgsl's Config.flags
GROUP = ("row_group",)  # the group kernels' shared entry (shaders/row_group.wgsl)
GRID = ("grid",)  # the one-item-per-invocation launch (shaders/grid.wgsl)


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def group_size(count: int) -> int:
    """Invocations reducing `count` elements: about 8 elements each, a power of two up to 256 (few
    barriers per element; short rows pack many per workgroup)."""
    return min(256, _pow2_ceil((count + 7) // 8))


def _config(group: int = 1, length: int = 1, groups: int = 1, cg: int = 1, inner: int = 1, outer: int = 0,
            outer_stride: int = 0, p_stride: int = 0, flags: int = 0, eps: float = 0.0,
            offsets: Sequence[int] = ()) -> list[int | float]:
    """nn_norm.wgsl's Config after its count and grid x (nine u32, eps, eight offsets)."""
    return [group, length, groups, cg, inner, outer, outer_stride, p_stride, flags, float(eps),
            *offsets, *([0] * (8 - len(offsets)))]


def _spatial(x: TensorArg) -> int:
    s = 1
    for d in x.shape[2:]:
        s *= d
    return s


class _Rows:
    """x seen as rows of `length` contiguous elements."""

    def __init__(self, rows: int, length: int) -> None:
        self.rows, self.length = rows, length

    def param_columns(self, dev: Any, gw: TensorArg, gb: TensorArg, has_bias: bool, g: TensorArg, x: TensorArg,
                      stats: Any) -> None:
        """Layer / RMS norm: dgamma, dbeta as column sums over the rows in two deterministic passes."""
        cols, rows = self.length, self.rows
        splits = max(1, min(COLUMN_THREADS // max(cols, 1), rows // COLUMN_MIN_ROWS))
        chunk = (rows + splits - 1) // splits
        splits = (rows + chunk - 1) // chunk
        parts = new_buffer(dev, splits * cols * 8, "norm parameter-gradient partials")
        words = _config(1, cols, splits, 1, chunk, rows, offsets=[0, 0, g.offset, x.offset])
        dispatch(dev, "nn_norm", "param_columns", x.dtype, [parts, g.buffer, x.buffer, stats], words, splits * cols,
                 include=GRID)
        words = _config(1, cols, splits, 1, chunk, rows, flags=BIAS if has_bias else 0, offsets=[gw.offset, gb.offset])
        dispatch(dev, "nn_norm", "param_columns_final", x.dtype, [gw.buffer, gb.buffer, parts], words, cols,
                 include=GRID)


def _zero(*outs: TensorArg | None) -> None:
    from .elementwise import fill
    for o in outs:
        if o is not None and o.numel:
            fill([o], [], {"value": 0.0})


def _trailing_rows(x: TensorArg, w: TensorArg) -> _Rows:
    cols = w.numel
    return _Rows(x.numel // cols if cols else 0, cols)


def _keep(op: RowOp) -> tuple[str, str] | None:
    """The row statistics the column sums read, (mean, rstd) (mean 0 where the op names none), or None
    where the op names no rstd."""
    names = {*op.row_values, *(n for p in op.passes for n, _ in split_lets(p.then)), *(n for n, _ in op.lets)}
    return ("mean" if "mean" in names else "0.0", "rstd") if "rstd" in names else None


@functools.cache
def dx_op(name: str) -> RowOp:
    """The row op of norm backward `name`'s gx: the table's entry where it holds one of the shape the
    kernel runs (inputs g and x, the weight its column operand), else row_wgsl.NORM_DX's."""
    entry = ROW_OPS.get(name)
    keep = _keep(entry) if entry is not None else None
    if entry is not None and keep is not None and len(entry.inputs) == 2 and len(entry.columns) == 1:
        try:
            row_shader(entry, keep)
            return entry
        except Unsupported:
            pass
    return NORM_DX[name]


def _rows_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any],
                   name: str) -> None:
    """Layer / RMS norm backward: gx and each row's (mean, rstd) from the row op, then the column sums."""
    gx, gw, gb = outputs[0], outputs[1], outputs[2] if len(outputs) > 2 else None
    g, x, w = inputs
    if x.numel == 0:
        _zero(gw, gb)
        return
    dev = device_of(outputs, inputs)
    g, x, w = dealias(dev, outputs, [g, x, w])[0]
    rows = _trailing_rows(x, w)
    op = dx_op(name)
    keep = _keep(op)
    if keep is None:
        raise RumusError(f"wgpu {name}: its gx row op names no rstd for the weight gradients")
    stats = new_buffer(dev, max(1, rows.rows) * 8, "norm statistics scratch")
    shape, strides = (rows.rows, rows.length), (rows.length, 1)

    def rows_of(a: TensorArg) -> TensorArg:
        return TensorArg(a.buffer, shape, strides, a.offset, a.dtype)
    eps = float(attrs["eps"])
    planned(dev, (name, *layouts(gx, g, x, w), eps),
            lambda: launch(dev, op, rows_of(gx), rows_of(g), rows_of(x), 1,
                           [TensorArg(w.buffer, (rows.length,), (1,), w.offset, w.dtype)], [eps], keep, stats),
            gx.buffer, g.buffer, x.buffer, [w.buffer, stats])
    bias = gb if gb is not None else TensorArg(new_buffer(dev, 16), (1,), (1,), 0, gw.dtype)
    rows.param_columns(dev, gw, bias, gb is not None, g, x, stats)


def layer_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_backward(outputs, inputs, attrs, "layer_norm_backward")


def rms_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_backward(outputs, inputs, attrs, "rms_norm_backward")


def group_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """The table's group_norm over N * G rows of C / G channels of S elements (x [N, C, *], S = prod(*))."""
    y = outputs[0]
    if y.numel == 0:
        return
    dev = device_of(outputs, inputs)
    x, w, b = dealias(dev, outputs, list(inputs))[0]
    groups, c, s = int(attrs["num_groups"]), x.shape[1], _spatial(x)
    shape, strides = (x.shape[0] * groups, c // groups * s), (c // groups * s, 1)
    eps = float(attrs["eps"])
    planned(dev, ("group_norm", *layouts(y, x, w, b), eps, groups),
            lambda: launch(dev, "group_norm", TensorArg(y.buffer, shape, strides, y.offset, y.dtype),
                           TensorArg(x.buffer, shape, strides, x.offset, x.dtype), None, 1,
                           [TensorArg(a.buffer, (c,), (1,), a.offset, a.dtype) for a in (w, b)], [eps],
                           column_groups=(groups, s)),
            y.buffer, x.buffer, None, [w.buffer, b.buffer])


def group_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """gx and each (sample, group) row's (mean, rstd) from the row op, then a group per parameter sums
    gw = sum g * xhat and gb = sum g over its N runs of S elements."""
    (gx, gw, gb), (g, x, w) = outputs, inputs
    if x.numel == 0:
        _zero(gw, gb)
        return
    dev = device_of(outputs, inputs)
    g, x, w = dealias(dev, outputs, [g, x, w])[0]
    groups, n, c, s = int(attrs["num_groups"]), x.shape[0], x.shape[1], _spatial(x)
    rows, cg = n * groups, c // groups
    op = dx_op("group_norm_backward")
    keep = _keep(op)
    if keep is None:
        raise RumusError("wgpu group_norm_backward: its gx row op names no rstd for the weight gradients")
    stats = new_buffer(dev, rows * 8, "norm statistics scratch")
    shape, strides = (rows, cg * s), (cg * s, 1)

    def rows_of(a: TensorArg) -> TensorArg:
        return TensorArg(a.buffer, shape, strides, a.offset, a.dtype)
    eps = float(attrs["eps"])
    planned(dev, ("group_norm_backward", *layouts(gx, g, x, w), eps, groups),
            lambda: launch(dev, op, rows_of(gx), rows_of(g), rows_of(x), 1,
                           [TensorArg(w.buffer, (c,), (1,), w.offset, w.dtype)], [eps], keep, stats, (groups, s)),
            gx.buffer, g.buffer, x.buffer, [w.buffer, stats])
    t = group_size(n * s)
    words = _config(t, groups=groups, cg=cg, inner=s, outer=n, outer_stride=c * s, p_stride=s, flags=BIAS,
                    offsets=[gw.offset, gb.offset, g.offset, x.offset])
    dispatch(dev, "nn_norm", "param_grads", x.dtype, [gw.buffer, gb.buffer, g.buffer, x.buffer, stats], words,
             gw.numel, 256 // t, GROUP)


def _channel_config(x: TensorArg, flags: int = 0, eps: float = 0.0, offsets: Sequence[int] = ()) -> list[int | float]:
    """Batch norm: channel c's N runs of S elements (its group reduces them)."""
    c, s = x.shape[1], _spatial(x)
    return _config(group_size(x.shape[0] * s), cg=c, inner=s, outer=x.shape[0], outer_stride=c * s, p_stride=s,
                   flags=flags, eps=eps, offsets=offsets)


def _per_channel_groups(x: TensorArg) -> int:
    """Channels per workgroup of the per-channel kernels."""
    return 256 // group_size(x.shape[0] * _spatial(x))


def batch_norm_stats(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (mean, var), x = outputs, inputs[0]
    if mean.numel == 0:
        return
    dev = device_of(outputs, inputs)
    (x,), _ = dealias(dev, outputs, [x])
    dispatch(dev, "nn_norm", "channel_stats+bn_stats", x.dtype, [mean.buffer, var.buffer, x.buffer],
             _channel_config(x, offsets=[mean.offset, var.offset, x.offset]), x.shape[1], _per_channel_groups(x),
             GROUP)


def batch_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, ins = outputs[0], inputs
    if y.numel == 0:
        return
    dev = device_of(outputs, ins)
    x, w, b, mean, var = dealias(dev, outputs, ins)[0]
    if attrs.get("training") and x.dtype.itemsize < 4:
        # mean / var are batch_norm_stats(x) rounded to the narrow dtype (three digits for float16): use
        # x's own statistics in float32 instead, as the op's definition says
        words = _channel_config(x, eps=float(attrs["eps"]), offsets=[y.offset, x.offset, w.offset, b.offset])
        dispatch(dev, "nn_norm", "channel_stats+bn_train", x.dtype, [y.buffer, x.buffer, w.buffer, b.buffer], words,
                 x.shape[1], _per_channel_groups(x), GROUP)
        return
    words = _channel_config(x, eps=float(attrs["eps"]),
                            offsets=[y.offset, x.offset, w.offset, b.offset, mean.offset, var.offset])
    dispatch(dev, "nn_norm", "bn_forward", x.dtype, [y.buffer, x.buffer, w.buffer, b.buffer, mean.buffer, var.buffer],
             words, y.numel, include=GRID)


def batch_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (gx, gw, gb) = outputs
    if gw.numel == 0:
        return
    dev = device_of(outputs, inputs)
    g, x, w, mean, var = dealias(dev, outputs, inputs)[0]
    flags = TRAINING if attrs.get("training") else 0
    words = _channel_config(x, flags, float(attrs["eps"]),
                            [gx.offset, gw.offset, gb.offset, g.offset, x.offset, w.offset, mean.offset, var.offset])
    dispatch(dev, "nn_norm", "bn_backward", x.dtype,
             [gx.buffer, gw.buffer, gb.buffer, g.buffer, x.buffer, w.buffer, mean.buffer, var.buffer], words,
             x.shape[1], _per_channel_groups(x), GROUP)


def kernels() -> dict[str, Any]:
    # layer_norm and rms_norm forward: the row-op table's kernels (softmax.py)
    return {"layer_norm_backward": layer_norm_backward, "rms_norm_backward": rms_norm_backward,
            "group_norm": group_norm,
            "group_norm_backward": group_norm_backward, "batch_norm_stats": batch_norm_stats,
            "batch_norm": batch_norm, "batch_norm_backward": batch_norm_backward}

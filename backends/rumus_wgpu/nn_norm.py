"""Layer, RMS, group and batch normalization and their backward ops (shaders/nn_norm.wgsl).

Reductions run in groups: a power-of-two group of invocations (about 8 elements each, up to 256;
short rows pack several groups per workgroup) per row or per parameter, summing in workgroup memory
(the group kernels share shaders/row_group.wgsl's entry). Layer / RMS / group norm are row kernels;
their backward ops take two steps: rows (gx, and each row's mean / rstd into a scratch buffer), then
the weight / bias gradients: a group per parameter for group norm, and for layer / RMS norm column
sums over the rows (`param_columns`: coalesced reads, the rows split over the grid, then each
column's splits folded in order, so the result is deterministic). Batch norm's statistics and
backward run a group per channel; its forward is elementwise. Inputs are contiguous (the schemas say
so), with offsets.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from .flash_attention import unroll
from .layout import NOVEC, dealias, device_of, env_set, grid, new_buffer
from .nn_common import dispatch, source
from .softmax import use_subgroups
from .reduce import COLUMN_MIN_ROWS, COLUMN_THREADS

CENTRED, BIAS, TRAINING = 1, 2, 4
HELD_SLOTS = 8  # register-row kernels: at most this many vec4s of a row per invocation (rows up to 8192)
HELD_LOADS = 4  # ... about this many per invocation: enough loads in flight, short reductions
FUSED_SHARES = 512  # the fused backward aims for about this many workgroups (column shares to fold)
GROUP = ("row_group",)  # the group kernels' shared entry (shaders/row_group.wgsl)
GRID = ("grid",)  # the one-item-per-invocation launch (shaders/grid.wgsl)


# the register-row kernels' row sum with subgroup shuffles (where the adapter has them): within each
# subgroup, then one value per subgroup through workgroup memory when a row spans several; two barriers
# instead of log2(group). WGSL does not promise that local_invocation_index runs along subgroups, so the
# kernels number invocations from a slot per subgroup (softmax.py's subgroup_vlid).
ROW_SUM2_SUBGROUP = """
var<private> sg_lane_p: u32;
var<private> sg_size_p: u32;

fn row_sum2(lid: u32, lane: u32, t: u32, v: vec2<f32>) -> vec2<f32> {
    var a = v;
    let span = min(t, sg_size_p);
    for (var h = 1u; h < span; h = h * 2u) {
        a += subgroupShuffleXor(a, h);
    }
    if (sg_lane_p == 0u) {
        red2[lid / sg_size_p] = a;
    }
    workgroupBarrier();
    if (t > sg_size_p) {
        let per = t / sg_size_p;
        let first = (lid / t) * per;
        a = red2[first];
        for (var k = 1u; k < per; k++) {
            a += red2[first + k];
        }
    }
    workgroupBarrier();
    return a;
}
"""
SG_MAIN_ARGS = ", @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32"
SG_VLID = ("sg_lane_p = sg_lane;\n    sg_size_p = sg_size;\n"
           "    let lid = subgroup_vlid(lidx, sg_lane, sg_size);")


def _with_subgroups(src: str) -> str:
    """The register-row kernel source with ROW_SUM2_SUBGROUP for its row sums."""
    from .softmax import _REDUCE_SUBGROUP
    begin = src.index("fn row_sum2(")
    end = src.index("\n}\n", begin) + 3
    vlid = _REDUCE_SUBGROUP[:_REDUCE_SUBGROUP.index("fn reduce_group(")]  # next_slot and subgroup_vlid
    src = src[:begin] + ROW_SUM2_SUBGROUP + vlid + src[end:]
    return src.replace("/*SG_ARGS*/", SG_MAIN_ARGS).replace(
        "let lid = lidx;  // VLID: the subgroup build numbers invocations along subgroups instead", SG_VLID)


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def group_size(count: int) -> int:
    """Invocations reducing `count` elements: about 8 elements each, a power of two up to 256 (few
    barriers per element; short rows pack many per workgroup)."""
    return min(256, _pow2_ceil((count + 7) // 8))


# nn_norm.wgsl's Config as one struct.pack (count, grid x, then _config's words: nine u32, eps, eight offsets):
# the register-row launches pack it per call, where the generic per-word pack cost the host more
CONFIG = struct.Struct("<11If8I")


def _config(group: int = 1, length: int = 1, groups: int = 1, cg: int = 1, inner: int = 1, outer: int = 0,
            outer_stride: int = 0, p_stride: int = 0, flags: int = 0, eps: float = 0.0,
            offsets: Sequence[int] = ()) -> list[int | float]:
    return [group, length, groups, cg, inner, outer, outer_stride, p_stride, flags, float(eps),
            *offsets, *([0] * (8 - len(offsets)))]


def _spatial(x: TensorArg) -> int:
    s = 1
    for d in x.shape[2:]:
        s *= d
    return s


class _Rows:
    """x seen as rows of `length` contiguous elements; element j of row r uses parameter
    (r % groups) * cg + j // inner."""

    def __init__(self, rows: int, length: int, groups: int, cg: int, inner: int) -> None:
        self.rows, self.length, self.groups, self.cg, self.inner = rows, length, groups, cg, inner
        self.group = group_size(length)

    def held_plan(self, *args: TensorArg | None) -> tuple[int, int] | None:
        """(invocations per row, vec4 slots each) of the register-row kernels (x and g read once per row),
        or None where they do not apply: group norm, rows not of 4-aligned vec4s, or rows too long to hold."""
        len4 = self.length // 4
        if (self.groups != 1 or self.inner != 1 or self.length % 4 or env_set(NOVEC) or len4 > 256 * HELD_SLOTS
                or any(a is not None and (a.offset % 4 or a.dtype.name not in ("float32", "float16")) for a in args)):
            return None
        t = min(256, _pow2_ceil((len4 + HELD_LOADS - 1) // HELD_LOADS))
        return t, (len4 + t - 1) // t

    def _held(self, dev: Any, section: str, dtype: Any, slots: int, buffers: list[Any], words: list[int | float],
              groups: int) -> int:
        """Launch a register-row kernel over `groups` workgroups; returns the workgroups the grid holds."""
        sg = use_subgroups(dev)

        def build() -> str:
            src = source("nn_norm", "fused_common+held_loads+" + section, dtype)
            src = _with_subgroups(src) if sg else src
            # loops over the slots written out: arrays indexed by constants stay in registers (a loop index
            # the driver does not unroll would put them in local memory)
            return unroll(src.replace("const SLOTS: u32 = 8u;", f"const SLOTS: u32 = {slots}u;"), {"SLOTS": slots})
        prog = dev.programs.get(("nn_norm_held", section, dtype.name, slots, sg), build)
        gx, gy, _ = grid(groups, dev.max_groups)
        dev.recorder.dispatch(prog, buffers, CONFIG.pack(self.rows, gx, *words), (gx, gy, 1))
        return gx * gy

    def forward(self, dev: Any, y: TensorArg, x: TensorArg, w: TensorArg, b: TensorArg | None, flags: int,
                eps: float) -> None:
        bias = b if b is not None else w  # RMS norm: bound twice, never read as a bias
        flags |= BIAS if b is not None else 0
        plan = self.held_plan(y, x, w, b)
        if plan is not None:
            t, slots = plan
            words = _config(t, self.length, inner=1, flags=flags, eps=eps,
                            offsets=[y.offset, x.offset, w.offset, bias.offset])
            self._held(dev, "fused_rows", x.dtype, slots, [y.buffer, x.buffer, w.buffer, bias.buffer], words,
                       (self.rows + 256 // t - 1) // (256 // t))
            return
        words = _config(self.group, self.length, self.groups, self.cg, self.inner, flags=flags, eps=eps,
                        offsets=[y.offset, x.offset, w.offset, bias.offset])
        dispatch(dev, "nn_norm", "rows_stats+rows", x.dtype, [y.buffer, x.buffer, w.buffer, bias.buffer], words,
                 self.rows, 256 // self.group, GROUP)

    def backward(self, dev: Any, gx: TensorArg, gw: TensorArg, gb: TensorArg | None, g: TensorArg, x: TensorArg,
                 w: TensorArg, flags: int, eps: float, outer: int, outer_stride: int, p_stride: int) -> None:
        plan = self.held_plan(gx, g, x, w)
        if plan is not None and outer == self.rows:
            self._fused_backward(dev, plan, gx, gw, gb, g, x, w, flags, eps)
            return
        stats = new_buffer(dev, max(1, self.rows) * 8, "norm statistics scratch")
        words = _config(self.group, self.length, self.groups, self.cg, self.inner, flags=flags, eps=eps,
                        offsets=[gx.offset, x.offset, g.offset, w.offset])
        dispatch(dev, "nn_norm", "rows_stats+rows_backward", x.dtype, [gx.buffer, x.buffer, g.buffer, w.buffer, stats],
                 words, self.rows, 256 // self.group, GROUP)
        bias = gb if gb is not None else TensorArg(new_buffer(dev, 16), (1,), (1,), 0, gw.dtype)
        if self.groups == 1 and self.inner == 1:
            self._param_columns(dev, gw, bias, gb is not None, g, x, stats)
            return
        t = group_size(outer * self.inner)
        words = _config(t, groups=self.groups, cg=self.cg, inner=self.inner, outer=outer, outer_stride=outer_stride,
                        p_stride=p_stride, flags=BIAS if gb is not None else 0,
                        offsets=[gw.offset, bias.offset, g.offset, x.offset])
        dispatch(dev, "nn_norm", "param_grads", x.dtype, [gw.buffer, bias.buffer, g.buffer, x.buffer, stats], words,
                 gw.numel, 256 // t, GROUP)

    def _fused_backward(self, dev: Any, plan: tuple[int, int], gx: TensorArg, gw: TensorArg, gb: TensorArg | None,
                        g: TensorArg, x: TensorArg, w: TensorArg, flags: int, eps: float) -> None:
        """Layer / RMS norm backward in two dispatches: gx and each workgroup's column shares of gw, gb from
        one read of x and g per row, then the shares folded per column in a fixed order (deterministic)."""
        t, slots = plan
        blocks = (self.rows + 256 // t - 1) // (256 // t)
        inner = max(1, (blocks + FUSED_SHARES - 1) // FUSED_SHARES)
        groups = (blocks + inner - 1) // inner
        gx_, gy, _ = grid(groups, dev.max_groups)
        parts = new_buffer(dev, gx_ * gy * self.length * 8, "norm parameter-gradient shares")
        words = _config(t, self.length, inner=inner, flags=flags, eps=eps,
                        offsets=[gx.offset, x.offset, g.offset, w.offset])
        shares = self._held(dev, "fused_rows_backward", x.dtype, slots,
                            [gx.buffer, x.buffer, g.buffer, w.buffer, parts], words, groups)
        bias = gb if gb is not None else TensorArg(new_buffer(dev, 16), (1,), (1,), 0, gw.dtype)
        fold_groups = (self.length + 15) // 16
        fx, fy, _ = grid(fold_groups, dev.max_groups)
        words = _config(1, self.length, shares, flags=BIAS if gb is not None else 0, offsets=[gw.offset, bias.offset])
        prog = dev.programs.get(("nn", "nn_norm", "fused_common+param_fold", gw.dtype.name, ()),
                                lambda: source("nn_norm", "fused_common+param_fold", gw.dtype))
        dev.recorder.dispatch(prog, [gw.buffer, bias.buffer, parts], CONFIG.pack(self.length, fx, *words), (fx, fy, 1))

    def _param_columns(self, dev: Any, gw: TensorArg, gb: TensorArg, has_bias: bool, g: TensorArg, x: TensorArg,
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
    return _Rows(x.numel // cols if cols else 0, cols, 1, cols, 1)


def _rows_forward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any],
                  rows_of: Callable[[TensorArg, TensorArg], _Rows], flags: int) -> None:
    """y = norm(x) * w (+ b) over the rows `rows_of(x, w)` describes; inputs (x, w) or (x, w, b)."""
    y = outputs[0]
    if y.numel == 0:
        return
    dev = device_of(outputs, inputs)
    args = dealias(dev, outputs, list(inputs))[0]
    x, w, b = args[0], args[1], args[2] if len(args) > 2 else None
    rows_of(x, w).forward(dev, y, x, w, b, flags, float(attrs["eps"]))


def layer_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_forward(outputs, inputs, attrs, _trailing_rows, CENTRED)


def rms_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_forward(outputs, inputs, attrs, _trailing_rows, 0)


def _rows_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any],
                   flags: int) -> None:
    gx, gw, gb = outputs[0], outputs[1], outputs[2] if len(outputs) > 2 else None
    g, x, w = inputs
    if x.numel == 0:
        _zero(gw, gb)
        return
    dev = device_of(outputs, inputs)
    g, x, w = dealias(dev, outputs, [g, x, w])[0]
    rows = _trailing_rows(x, w)
    rows.backward(dev, gx, gw, gb, g, x, w, flags, float(attrs["eps"]), rows.rows, rows.length, 1)


def layer_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_backward(outputs, inputs, attrs, CENTRED)


def rms_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _rows_backward(outputs, inputs, attrs, 0)


def _group_rows(x: TensorArg, num_groups: int) -> _Rows:
    c, s = x.shape[1], _spatial(x)
    return _Rows(x.shape[0] * num_groups, (c // num_groups) * s, num_groups, c // num_groups, s)


def group_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    groups = int(attrs["num_groups"])
    _rows_forward(outputs, inputs, attrs, lambda x, w: _group_rows(x, groups), CENTRED)


def group_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (gx, gw, gb), (g, x, w) = outputs, inputs
    if x.numel == 0:
        _zero(gw, gb)
        return
    dev = device_of(outputs, inputs)
    g, x, w = dealias(dev, outputs, [g, x, w])[0]
    c, s = x.shape[1], _spatial(x)
    rows = _group_rows(x, int(attrs["num_groups"]))
    rows.backward(dev, gx, gw, gb, g, x, w, CENTRED, float(attrs["eps"]), x.shape[0], c * s, s)


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
    return {"layer_norm": layer_norm, "layer_norm_backward": layer_norm_backward, "rms_norm": rms_norm,
            "rms_norm_backward": rms_norm_backward, "group_norm": group_norm,
            "group_norm_backward": group_norm_backward, "batch_norm_stats": batch_norm_stats,
            "batch_norm": batch_norm, "batch_norm_backward": batch_norm_backward}

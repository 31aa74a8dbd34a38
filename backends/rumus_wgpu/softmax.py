"""softmax / log_softmax along one dim (shaders/softmax.wgsl over the row machinery of reduce.py).

The launch plan spreads every row length over the whole GPU: a group of invocations per row sized for
about four loads each (short rows pack many per workgroup, long rows get a whole one), vec4 loads and
stores on contiguous 4-aligned rows, and a long row among few rows split into chunks over grid z (a
partial (max, sum) per chunk, then a pass that merges them and writes each chunk). The group's merge
uses subgroup operations where the device has the `subgroup` feature, workgroup memory otherwise
(RUMUS_WGPU_NO_SUBGROUPS=1 forces the latter).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg

from .layout import dealias, device_of, env_set, grid, new_buffer
from .pipelines import render
from .reduce import NO_SUBGROUPS, SPLIT_CHUNK, Rows, cached, pow2_ceil, pow2_floor, vec_rows

LOADS_PER_INVOCATION = 4  # enough loads in flight per invocation, few invocations idle in the merge
SPLIT_WORKGROUPS = 1024  # a split launch aims for about this many workgroups

# the merge of the pairs of a row's group: through workgroup memory (a tree, log2(group) barriers) ...
_REDUCE_WORKGROUP = """
fn reduce_group(lid: u32, lane: u32, t: u32, acc: vec2<f32>, ninf: f32) -> vec2<f32> {
    red_m[lid] = acc.x;
    red_s[lid] = acc.y;
    workgroupBarrier();
    for (var h = t / 2u; h > 0u; h = h / 2u) {
        if (lane < h) {
            let r = merge(vec2<f32>(red_m[lid], red_s[lid]), vec2<f32>(red_m[lid + h], red_s[lid + h]), ninf);
            red_m[lid] = r.x;
            red_s[lid] = r.y;
        }
        workgroupBarrier();
    }
    return vec2<f32>(red_m[lid - lane], red_s[lid - lane]);
}
"""
# ... or with subgroup shuffles within each subgroup, then one pair per subgroup through workgroup
# memory when a row spans several subgroups. WGSL does not promise that local_invocation_index runs
# along subgroups, so each subgroup takes a slot and its invocations number themselves from it (vlid).
_REDUCE_SUBGROUP = """
var<workgroup> next_slot: atomic<u32>;

fn subgroup_vlid(lid: u32, sg_lane: u32, sg_size: u32) -> u32 {
    if (lid == 0u) {
        atomicStore(&next_slot, 0u);
    }
    workgroupBarrier();
    var slot = 0u;
    if (sg_lane == 0u) {
        slot = atomicAdd(&next_slot, 1u);
    }
    return subgroupBroadcast(slot, 0u) * sg_size + sg_lane;
}

fn reduce_group(vlid: u32, lane: u32, t: u32, acc: vec2<f32>, ninf: f32, sg_lane: u32, sg_size: u32)
        -> vec2<f32> {
    var a = acc;
    let span = min(t, sg_size);
    for (var h = 1u; h < span; h = h * 2u) {
        a = merge(a, subgroupShuffleXor(a, h), ninf);
    }
    let slot = vlid / sg_size;
    if (sg_lane == 0u) {
        red_m[slot] = a.x;
        red_s[slot] = a.y;
    }
    workgroupBarrier();
    if (t > sg_size) {
        let per = t / sg_size;
        let first = (vlid / t) * per;
        a = vec2<f32>(red_m[first], red_s[first]);
        for (var k = 1u; k < per; k++) {
            a = merge(a, vec2<f32>(red_m[first + k], red_s[first + k]), ninf);
        }
    }
    return a;
}
"""
_SG_ARGS = (", @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32")


# per op: the row pass folding one element (scalar) or four (vec4, `v`; backward ops also `w` = y) into
# acc, the values the output pass needs from the merged acc, and the output of one element (x; y = w)
_FOLD = {"fwd": ("acc = fold1(acc, x, ninf);", "acc = fold4(acc, v, ninf);"),
         "softmax_backward": ("acc.y += x * w;", "acc.y += dot(v, w);"),
         "log_softmax_backward": ("acc.y += x;", "acc.y += dot(v, vec4<f32>(1.0));")}
_FINISH = {"softmax": "let m = acc.x;\n    let inv = 1.0 / acc.y;",
           "log_softmax": "let m = acc.x;\n    let ls = log(acc.y);",
           "softmax_backward": "let sum = acc.y;", "log_softmax_backward": "let sum = acc.y;"}
_OUT = {"softmax": "exp(x - m) * inv", "log_softmax": "x - m - ls", "softmax_backward": "w * (x - sum)",
        "log_softmax_backward": "x - exp(w) * sum"}


def _walk(vec: bool, two: bool, body: str, store: str = "") -> str:
    """A loop over this invocation's elements of [begin, end): x (and w, the second input) loaded."""
    if vec:
        loads = "        let v = vec4<f32>(in0[(ib + r) / 4u]);\n"
        if two:
            loads += "        let w = vec4<f32>(in1[(ib + delta + r) / 4u]);\n"
        out = f"        out0[(ob + r) / 4u] = vec4<scalar>({store});\n" if store else ""
        return ("    for (var r = begin + lane * 4u; r < end; r += t * 4u) {\n" + loads
                + (f"        {body}\n" if body else "") + out + "    }")
    loads = "        let x = f32(in0[u32(base.x + i32(r) * s_in)]);\n"
    if two:
        loads += "        let w = f32(in1[u32(base.x + i32(delta) + i32(r) * s_in)]);\n"
    out = f"        out0[u32(base.y + i32(r) * sout)] = scalar({store});\n" if store else ""
    return ("    for (var r = begin + lane; r < end; r += t) {\n" + loads + (f"        {body}\n" if body else "")
            + out + "    }")


def _vec_expr(expr: str) -> str:
    """An output expression of x (and w) as the vec4 form over v (and w): WGSL mixes vectors and scalars."""
    return re.sub(r"\bx\b", "v", expr)


def softmax_source(op: str, scalar: str, vec: bool, mode: str, subgroups: bool) -> str:
    """op: softmax, log_softmax or their _backward (inputs grad, y). mode: "single" (one pass writes the
    rows), "partial" (each chunk's pair into `parts`) or "final" (merge a row's partials, write the chunk)."""
    two = op.endswith("_backward")
    reduce = ("    acc = reduce_group(vlid, lane, t, acc, ninf, sg_lane, sg_size);" if subgroups
              else "    acc = reduce_group(lid, lane, t, acc, ninf);")
    fold = _FOLD[op if two else "fwd"][1 if vec else 0]
    out = _vec_expr(_OUT[op]) if vec else _OUT[op]
    store = _walk(vec, two, "", out)
    finish = "    " + _FINISH[op]
    if mode == "partial":
        body = "\n".join([_walk(vec, two, fold), reduce, "    if (valid && lane == 0u) {",
                          "        parts[o * cfg.splits + wid.z] = acc;", "    }"])
    elif mode == "final":
        gather = ("    for (var j = select(cfg.splits, lane, valid); j < cfg.splits; j += t) {\n"
                  "        acc = merge(acc, parts[o * cfg.splits + j], ninf);\n"
                  "    }")
        body = "\n".join([gather, reduce, finish, store])
    else:
        body = "\n".join([_walk(vec, two, fold), reduce, finish, store])
    io_type = "vec4<scalar>" if vec else "scalar"
    extra = [f"var<storage, read> in1: array<{io_type}>;"] if two else []
    if mode != "single":
        extra.append(f"var<storage, {'read_write' if mode == 'partial' else 'read'}> parts: array<vec2<f32>>;")
    bindings = "\n".join(f"@group(0) @binding({2 + i}) {decl}" for i, decl in enumerate(extra))
    # a sum (backward ops) is a pair with max 0: merge adds the sums unscaled
    init = "vec2<f32>(0.0, 0.0)" if two else "vec2<f32>(ninf, 0.0)"
    return render("softmax", scalar=scalar, include=("rows",), BODY=body, INIT=init,
                  REDUCE=_REDUCE_SUBGROUP if subgroups else _REDUCE_WORKGROUP,
                  SG_ARGS=_SG_ARGS if subgroups else "",
                  VLID="subgroup_vlid(lid, sg_lane, sg_size)" if subgroups else "lid",
                  IN_TYPE=io_type, OUT_TYPE=io_type, PARTS=bindings, CONFIG=str(2 + len(extra)))


def use_subgroups(dev: Any) -> bool:
    return "subgroup" in dev.features and not env_set(NO_SUBGROUPS)


def group_for(rows: Rows, per: int) -> int:
    """Invocations per row: about LOADS_PER_INVOCATION loads each, a power of two up to 256; over an
    outer dim with many rows, small groups, so neighbouring invocations read neighbouring rows."""
    loads = (rows.rlen + per - 1) // per
    t = min(256, pow2_ceil((loads + LOADS_PER_INVOCATION - 1) // LOADS_PER_INVOCATION))
    if rows.rstr and rows.rstr[-1] != 1 and rows.rows >= 2048:
        t = max(1, min(t, pow2_floor(65536 // rows.rows)))
    return t


def launch(dev: Any, op: str, out: TensorArg, x: TensorArg, y: TensorArg | None, dim: int) -> Any:
    """Record `op` over rows along `dim` of x (and y, laid out as x: the backward ops' second input);
    returns (program, uniform, grid) when it was one dispatch over [out, x] (a cacheable launch)."""
    if not x.shape:  # a 0-d tensor is a row of one element
        x = TensorArg(x.buffer, (1,), (1,), x.offset, x.dtype)
        out = TensorArg(out.buffer, (1,), (1,), out.offset, out.dtype)
        y = TensorArg(y.buffer, (1,), (1,), y.offset, y.dtype) if y is not None else None
    rows = Rows(x, out, (dim,))
    rows.rsizes, rows.rstr = [x.shape[dim]], [x.strides[dim]]
    rows.out_rstride = out.strides[dim]
    # the output keeps the row dim, so out.numel counts elements, not rows: one group per row
    rows.rows = x.numel // rows.rlen
    if y is not None:
        if y.strides != x.strides:
            raise RumusError(f"wgpu {op}: grad and y must share one layout (the schema makes both contiguous), "
                             f"got strides {x.strides} and {y.strides}")
        rows.in1_delta = y.offset - x.offset
    # vec4 loads and stores: rows contiguous, every row start 4-aligned
    vec = (vec_rows(rows, x.dtype) and rows.out_rstride == 1 and rows.out_offset % 4 == 0
           and all(s % 4 == 0 for s in rows.kout) and rows.in1_delta % 4 == 0)
    per = 4 if vec else 1
    t = group_for(rows, per)
    groups = (rows.rows + 256 // t - 1) // (256 // t)
    splits = 1
    if t == 256 and groups * 8 < SPLIT_WORKGROUPS and rows.rlen > 2 * SPLIT_CHUNK:
        splits = min((rows.rlen + SPLIT_CHUNK - 1) // SPLIT_CHUNK, max(1, SPLIT_WORKGROUPS // groups),
                     dev.max_groups)
    chunk = (rows.rlen + splits - 1) // splits
    chunk = (chunk + per - 1) // per * per
    gx, gy, _ = grid(groups, dev.max_groups)
    scalar = "f16" if x.dtype.name == "float16" else "f32"
    sg = use_subgroups(dev)
    buffers = [out.buffer, x.buffer] + ([y.buffer] if y is not None else [])

    def program(mode: str) -> Any:
        return dev.programs.get(("softmax", op, x.dtype.name, vec, mode, sg),
                                lambda: softmax_source(op, scalar, vec, mode, sg))
    if splits == 1:
        prog, data = program("single"), rows.pack(t, gx, rows.rlen, 0)
        dev.recorder.dispatch(prog, buffers, data, (gx, gy, 1))
        return (prog, data, (gx, gy, 1)) if y is None else None
    parts = new_buffer(dev, rows.rows * splits * 8, "softmax partials")
    data = rows.pack(t, gx, chunk, splits)
    dev.recorder.dispatch(program("partial"), [*buffers, parts], data, (gx, gy, splits))
    dev.recorder.dispatch(program("final"), [*buffers, parts], data, (gx, gy, splits))
    return None


def softmax_kernel(op: str) -> Any:
    def kernel(dev: Any, out: TensorArg, x: TensorArg, attrs: Mapping[str, Any]) -> Any:
        return launch(dev, op, out, x, None, int(attrs.get("dim", 0)))
    return cached(op, kernel)


def backward_kernel(op: str) -> Any:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        dx = outputs[0]
        if dx.numel == 0:
            return
        dev = device_of(outputs, inputs)
        (g, y), _ = dealias(dev, outputs, list(inputs))
        launch(dev, op, dx, g, y, int(attrs.get("dim", 0)))
    return kernel


def kernels() -> dict[str, Any]:
    ops = ("softmax", "log_softmax")
    return {**{op: softmax_kernel(op) for op in ops},
            **{f"{op}_backward": backward_kernel(f"{op}_backward") for op in ops}}

"""softmax / log_softmax along one dim (shaders/softmax.wgsl over the row machinery of reduce.py).

The launch plan spreads every row length over the whole GPU: a group of invocations per row sized for
about four loads each (short rows pack many per workgroup, long rows get a whole one), vec4 loads and
stores on contiguous 4-aligned rows, and a long row among few rows split into chunks over grid z (a
partial (max, sum) per chunk, then a pass that merges them and writes each chunk). The group's merge
uses subgroup operations where the device has the `subgroup` feature, workgroup memory otherwise
(RUMUS_WGPU_NO_SUBGROUPS=1 forces the latter).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rumus_contracts import TensorArg

from .layout import env_set, grid, new_buffer
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


def _fold(vec: bool) -> str:
    if vec:
        return ("    for (var r = begin + lane * 4u; r < end; r += t * 4u) {\n"
                "        acc = fold4(acc, vec4<f32>(in0[(ib + r) / 4u]), ninf);\n"
                "    }")
    return ("    for (var r = begin + lane; r < end; r += t) {\n"
            "        acc = fold1(acc, f32(in0[u32(base.x + i32(r) * s_in)]), ninf);\n"
            "    }")


def _store(log: bool, vec: bool) -> str:
    def out(x: str) -> str:
        return f"{x} - m - ls" if log else f"exp({x} - m) * inv"
    if vec:
        return ("    for (var r = begin + lane * 4u; r < end; r += t * 4u) {\n"
                "        let v = vec4<f32>(in0[(ib + r) / 4u]);\n"
                f"        out0[(ob + r) / 4u] = vec4<scalar>({out('v')});\n"
                "    }")
    return ("    for (var r = begin + lane; r < end; r += t) {\n"
            "        let x = f32(in0[u32(base.x + i32(r) * s_in)]);\n"
            f"        out0[u32(base.y + i32(r) * sout)] = scalar({out('x')});\n"
            "    }")


def softmax_source(log: bool, scalar: str, vec: bool, mode: str, subgroups: bool) -> str:
    """mode: "single" (one pass writes the rows), "partial" (each chunk's (max, sum) into `parts`) or
    "final" (merge a row's partials, write the chunk)."""
    reduce = ("    acc = reduce_group(vlid, lane, t, acc, ninf, sg_lane, sg_size);" if subgroups
              else "    acc = reduce_group(lid, lane, t, acc, ninf);")
    finish = "    let m = acc.x;\n    " + ("let ls = log(acc.y);" if log else "let inv = 1.0 / acc.y;")
    if mode == "partial":
        body = "\n".join([_fold(vec), reduce, "    if (valid && lane == 0u) {",
                          "        parts[o * cfg.splits + wid.z] = acc;", "    }"])
    elif mode == "final":
        gather = ("    for (var j = select(cfg.splits, lane, valid); j < cfg.splits; j += t) {\n"
                  "        acc = merge(acc, parts[o * cfg.splits + j], ninf);\n"
                  "    }")
        body = "\n".join([gather, reduce, finish, _store(log, vec)])
    else:
        body = "\n".join([_fold(vec), reduce, finish, _store(log, vec)])
    split = mode != "single"
    access = "read_write" if mode == "partial" else "read"
    parts = f"@group(0) @binding(2) var<storage, {access}> parts: array<vec2<f32>>;" if split else ""
    io_type = "vec4<scalar>" if vec else "scalar"
    src = render("softmax", scalar=scalar, include=("rows",), BODY=body,
                 REDUCE=_REDUCE_SUBGROUP if subgroups else _REDUCE_WORKGROUP,
                 SG_ARGS=_SG_ARGS if subgroups else "",
                 VLID="subgroup_vlid(lid, sg_lane, sg_size)" if subgroups else "lid",
                 IN_TYPE=io_type, OUT_TYPE=io_type, PARTS=parts, CONFIG="3" if split else "2")
    return src


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


def softmax_kernel(log: bool) -> Any:
    def kernel(dev: Any, out: TensorArg, x: TensorArg, attrs: Mapping[str, Any]) -> Any:
        if not x.shape:  # a 0-d tensor is a row of one element
            x = TensorArg(x.buffer, (1,), (1,), x.offset, x.dtype)
            out = TensorArg(out.buffer, (1,), (1,), out.offset, out.dtype)
        dim = int(attrs.get("dim", 0))
        rows = Rows(x, out, (dim,))
        rows.rsizes, rows.rstr = [x.shape[dim]], [x.strides[dim]]
        rows.out_rstride = out.strides[dim]
        # the output keeps the row dim, so out.numel counts elements, not rows: one group per row
        rows.rows = x.numel // rows.rlen
        # vec4 loads and stores: both rows contiguous, every row start 4-aligned
        vec = (vec_rows(rows, x.dtype) and rows.out_rstride == 1 and rows.out_offset % 4 == 0
               and all(s % 4 == 0 for s in rows.kout))
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

        def program(mode: str) -> Any:
            return dev.programs.get(("softmax", log, x.dtype.name, vec, mode, sg),
                                    lambda: softmax_source(log, scalar, vec, mode, sg))
        if splits == 1:
            prog, data = program("single"), rows.pack(t, gx, rows.rlen, 0)
            dev.recorder.dispatch(prog, [out.buffer, x.buffer], data, (gx, gy, 1))
            return prog, data, (gx, gy, 1)
        parts = new_buffer(dev, rows.rows * splits * 8, "softmax partials")
        data = rows.pack(t, gx, chunk, splits)
        dev.recorder.dispatch(program("partial"), [out.buffer, x.buffer, parts], data, (gx, gy, splits))
        dev.recorder.dispatch(program("final"), [out.buffer, x.buffer, parts], data, (gx, gy, splits))
        return None
    return cached("log_softmax" if log else "softmax", kernel)


def kernels() -> dict[str, Any]:
    return {"softmax": softmax_kernel(False), "log_softmax": softmax_kernel(True)}

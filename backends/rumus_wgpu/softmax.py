"""The row ops of the row-op table (softmax, log_softmax and their backward, layer / RMS norm; the norms'
gx for nn_norm.py) along one dim: shaders/softmax.wgsl over the row machinery of reduce.py, its walks,
merges, finish and stores rendered from rumus_contracts/ops/row_ops.py (row_wgsl.py). An op walks the
row once per group of its passes (row_wgsl.Walk), then once more to store; column operands (a norm's
weight and bias) are read at the element's place in the row, params come through the uniform.

The launch plan (row_plan.py) spreads every row length over the whole GPU: a group of invocations per
row sized for about four loads each (short rows pack many per workgroup, long rows get a whole one),
the loads of a step issued together, vec4 loads and stores on contiguous 4-aligned rows (other contiguous
rows fold their aligned body as vec4), and a long row among few rows split into chunks over grid z (a
partial pair per chunk, then a pass that merges them and writes each chunk; ops of one walk only). The group's merge
uses subgroup operations where the device has the `subgroup` feature, workgroup memory otherwise
(RUMUS_WGPU_NO_SUBGROUPS=1 forces the latter).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg, config
from rumus_contracts.tensor_arg import contiguous_strides
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.row_ops import ROW_OPS, RowOp
from rumus_contracts.ops.row_wgsl import PARAM_FIELDS, RowShader, Walk, row_shader

from .layout import NOVEC, dealias, device_of, env_set, grid, new_buffer, remember
from .pipelines import render
from .reduce import NO_SUBGROUPS, Rows, cached, vec_rows
from .row_plan import RowPlan, plan_key, plan_rows

ALIGNED_MIN = 64  # contiguous rows this long read their 4-aligned body as vec4 (a vec4 view needs 16 bytes)

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


def _shader(op: str | RowOp, keep: tuple[str, ...] = ()) -> RowShader:
    """The op's walks, finish and output from the row-op table (rumus_contracts/ops/row_wgsl.py)."""
    return row_shader(op, keep)


_MERGE_ONLINE = """
fn merge(a: vec2<f32>, b: vec2<f32>, ninf: f32) -> vec2<f32> {
    return merge_online(a, b, ninf);
}
"""
_MERGE_SUMS = """
fn merge(a: vec2<f32>, b: vec2<f32>, ninf: f32) -> vec2<f32> {
    return a + b;
}
"""
_OPERAND = re.compile(r"(?<![.\w])([xvwcd])\b")  # one load's values in element code (not acc.x)


def _named(code: str, k: int) -> str:
    """code over one load's values (x or v, w, c, d) renamed to the k-th load's (x0 / v0 / w0, ...)."""
    return _OPERAND.sub(lambda m: f"{m.group(1)}{k}", code)


def _needed(loads: list[str], body: str) -> str:
    """The loads (`let NAME = ...;` lines) whose value the body reads: a walk reads only its operands."""
    return "".join(line for line in loads if re.search(rf"\b{line.split()[1]}\b", body))


def _loads(vec: bool, k: int, arrays: tuple[str, str] = ("in0", "in1"), grouped: bool = False) -> list[str]:
    """Load k of a step: the k-th of the invocation's strided units from r (vec4 or scalar): x (v), w from
    the second input, c and d from the column operands at the element's place in the row (grouped, scalar
    rows only: at its channel's, gc0 + place / gin). arrays: the vec4 bindings of the inputs (in0 / in1,
    or the aligned views of scalar rows)."""
    if vec:
        at = f"r + {4 * k}u * t" if k else "r"
        return [f"        let v{k} = vec4<f32>({arrays[0]}[(ib + {at}) / 4u]);\n",
                f"        let w{k} = vec4<f32>({arrays[1]}[(ib + delta + {at}) / 4u]);\n",
                f"        let c{k} = vec4<f32>(col0[(cfg.col_off.x + {at}) / 4u]);\n",
                f"        let d{k} = vec4<f32>(col1[(cfg.col_off.y + {at}) / 4u]);\n"]
    at = f"r + {k}u * t" if k else "r"
    col = f"gc0 + ({at}) / gin" if grouped else at
    return [f"        let x{k} = f32(in0[u32(base.x + i32({at}) * s_in)]);\n",
            f"        let w{k} = f32(in1[u32(base.x + i32(delta) + i32({at}) * s_in)]);\n",
            f"        let c{k} = f32(col0[cfg.col_off.x + {col}]);\n",
            f"        let d{k} = f32(col1[cfg.col_off.y + {col}]);\n"]


def _load_element(e: str) -> list[str]:
    """Load 0 as scalars: element `e` of a contiguous row (x0; w0 from the second input)."""
    return [f"        let x0 = f32(in0[ib + {e}]);\n", f"        let w0 = f32(in1[ib + delta + {e}]);\n"]


def _store(vec: bool, k: int, expr: str) -> str:
    if vec:
        at = f"r + {4 * k}u * t" if k else "r"
        return f"        out0[(ob + {at}) / 4u] = vec4<scalar>({_named(expr, k)});\n"
    at = f"r + {k}u * t" if k else "r"
    return f"        out0[u32(base.y + i32({at}) * sout)] = scalar({_named(expr, k)});\n"


def _walk(vec: bool, unroll: int, fold: tuple[str, str] | None, store: str = "",
          arrays: tuple[str, str] = ("in0", "in1"), span: tuple[str, str] = ("begin", "end"), head: str = "",
          grouped: bool = False) -> str:
    """This invocation's walk over [span) (the chunk [begin, end) unless given): steps of `unroll` loads
    issued before any of them is used (the loads of a step in flight together), then single loads for
    the rest. fold: (the step's fold of loads 0..unroll-1, the fold of one load 0), or None in the store
    pass, which writes `store` (an expression of x, or v, w, c, d) for every load. head: code run first.
    grouped: the column operands are read at the element's channel (_loads)."""
    width = "4u * t" if vec else "t"
    first, end = span
    parts = [head] if head else []
    parts.append(f"    var r = {first} + lane * 4u;" if vec else f"    var r = {first} + lane;")

    def loop(n: int, cond: str, step: str, body: str) -> None:
        code = (f"        {body}\n" if body else "") + "".join(_store(vec, k, store) for k in range(n) if store)
        loads = _needed([line for k in range(n) for line in _loads(vec, k, arrays, grouped)], code)
        parts.append(f"    for (; {cond}; r += {step}) {{\n{loads}{code}    }}")
    if unroll > 1:
        # the last load of a step, (unroll - 1) widths on, still inside the chunk
        loop(unroll, f"r + {unroll - 1}u * {width} < {end}", f"{unroll}u * {width}", fold[0] if fold else "")
    loop(1, f"r < {end}", width, fold[1] if fold else "")
    return "    {\n" + "\n".join(parts) + "\n    }"


def _aligned_walk(unroll: int, fold_vec: tuple[str, str], fold_one: str) -> str:
    """The fold walk of a contiguous row that is not 4-aligned (an odd length, an offset view): its head
    (up to 3 elements before the first 4-aligned one) and tail (up to 3 after the last whole vec4) as
    scalars, the aligned body in between through the vec4 views in0v / in1v (the second input sits a
    multiple of 4 elements from the first, launch() checks; the folds read no column operand)."""
    # b0: begin, or end (0) past the last row, so every length below is >= 0
    head = ("    let b0 = min(begin, end);\n"
            "    let a0 = min(b0 + (4u - (ib + b0) % 4u) % 4u, end);  // the first 4-aligned element\n"
            "    let a1 = a0 + (end - a0) / 4u * 4u;  // past the last whole vec4\n"
            "    let nh = a0 - b0;\n"
            "    for (var j = lane; j < nh + end - a1; j += t) {\n"
            "        let e = select(a1 + j - nh, b0 + j, j < nh);\n"
            f"{_needed(_load_element('e'), fold_one)}        {fold_one}\n"
            "    }")
    return _walk(True, unroll, fold_vec, arrays=("in0v", "in1v"), span=("a0", "a1"), head=head)


def _per_element(code: str) -> bool:
    return _OPERAND.search(code) is not None


def _folds(sh: RowShader, walk: Walk, vec: bool, unroll: int) -> tuple[str, str]:
    """(the fold of a step's `unroll` loads, the fold of one load) into acc, over loads named 0.."""
    if walk.kind == "sum":
        ones = []
        for slot, element, (a, b) in zip(walk.slots, walk.elements, walk.dots):
            if vec:
                a, b = (sh.vec(u) if _per_element(u) else f"vec4<f32>({u})" for u in (a, b))
                ones.append(f"acc.{slot} += dot({a}, {b});")
            else:
                ones.append(f"acc.{slot} += {element};")
        one = " ".join(ones)
        return " ".join(_named(one, k) for k in range(unroll)), _named(one, 0)
    if vec:
        es = [_named(sh.vec(walk.elements[0]), k) for k in range(4)]
        many = f"acc = fold16(acc, {', '.join(es)}, ninf);" if unroll == 4 else ""
        return many, f"acc = fold4(acc, {es[0]}, ninf);"
    es = [_named(walk.elements[0], k) for k in range(4)]
    many = f"acc = fold4(acc, vec4<f32>({', '.join(es)}), ninf);" if unroll == 4 else ""
    return many, f"acc = fold1(acc, {es[0]}, ninf);"


def softmax_source(op: str | RowOp, scalar: str, vec: bool, mode: str, subgroups: bool, unroll: int = 1,
                   aligned: bool = False, keep: tuple[str, ...] = ()) -> str:
    """op: a row op of the table (softmax, log_softmax, their _backward with inputs (grad, y), the norms
    with their column operands). mode: "single" (one pass writes the rows), "partial" (each chunk's pair
    into `parts`) or "final" (merge a row's partials, write the chunk); the split modes only for ops of
    one walk. unroll: loads an invocation issues before using them (1 or 4; row_plan.py). aligned
    (scalar rows, not vec): contiguous rows whose fold walks read the 4-aligned body as vec4
    (_aligned_walk). keep: per-row expressions (row_shader's) stored into `kept` (len(keep) per row)."""
    if unroll not in (1, 4):
        raise RumusError(f"wgpu {op}: a row walk unrolls 1 or 4 loads, got {unroll}")
    sh = _shader(op, keep)
    if mode != "single" and (len(sh.walks) > 1 or keep):
        raise RumusError(f"wgpu {op}: a row op of {len(sh.walks)} walks, or one keeping row values, runs unsplit")
    two = sh.inputs == 2
    aligned = aligned and not vec and not sh.columns_in_folds
    reduce = ("    acc = reduce_group(vlid, lane, t, acc, ninf, sg_lane, sg_size);" if subgroups
              else "    acc = reduce_group(lid, lane, t, acc, ninf);")
    # a lone sum is a pair with max 0: merge adds the sums unscaled
    init = "vec2<f32>(0.0, 0.0)" if sh.kind == "sum" else "vec2<f32>(ninf, 0.0)"
    walks = []
    for i, wk in enumerate(sh.walks):
        fold = _folds(sh, wk, vec, unroll)
        code = (_aligned_walk(unroll, _folds(sh, wk, True, unroll), fold[1]) if aligned
                else _walk(vec, unroll, fold, grouped=sh.grouped))
        if i:  # the group's merge slots are read until every invocation has its pair: then reused
            walks += ["    workgroupBarrier();", f"    acc = {init};"]
        walks += [code, reduce, "    " + wk.bind] if mode == "single" else [code, reduce]
    out = sh.vec(sh.out) if vec else sh.out
    store = _walk(vec, unroll, None, out, grouped=sh.grouped)
    finish = "    " + sh.finish
    if mode == "partial":
        body = "\n".join([*walks, "    if (valid && lane == 0u) {",
                          "        parts[o * cfg.splits + wid.z] = acc;", "    }"])
    elif mode == "final":
        gather = ("    for (var j = select(cfg.splits, lane, valid); j < cfg.splits; j += t) {\n"
                  "        acc = merge(acc, parts[o * cfg.splits + j], ninf);\n"
                  "    }")
        body = "\n".join([gather, reduce, "    " + sh.walks[0].bind, finish, store])
    else:
        kept = [f"        kept[o * {len(sh.keep)}u + {i}u] = {k};" for i, k in enumerate(sh.keep)]
        body = "\n".join([*walks, finish, *(["    if (valid && lane == 0u) {", *kept, "    }"] if kept else []),
                          store])
    # the uniform values the table's expressions name
    lets = [f"    let {name} = cfg.{field};" for name, field in zip(sh.param_names, PARAM_FIELDS)]
    lets.append("    let n = f32(cfg.rlen);")
    if sh.grouped:  # row o's first channel gc0, gin elements a channel (launch's column_groups)
        lets += ["    let gin = cfg.col_off.w;", "    let gc0 = (o % cfg.col_off.z) * (cfg.rlen / gin);"]
    body = "".join(f"{let}\n" for let in lets if re.search(rf"\b{let.split()[1]}\b", body)) + body
    io_type = "vec4<scalar>" if vec else "scalar"
    extra = [f"var<storage, read> in1: array<{io_type}>;"] if two else []
    if mode != "single":
        extra.append(f"var<storage, {'read_write' if mode == 'partial' else 'read'}> parts: array<vec2<f32>>;")
    if aligned and mode != "final":  # the vec4 views of the inputs (the same buffers, read-only twice)
        extra += [f"var<storage, read> {name}: array<vec4<scalar>>;" for name in ("in0v", "in1v")[:1 + two]]
    extra += [f"var<storage, read> col{i}: array<{io_type}>;" for i in range(sh.columns)]
    if sh.keep:
        extra.append("var<storage, read_write> kept: array<f32>;")
    bindings = "\n".join(f"@group(0) @binding({2 + i}) {decl}" for i, decl in enumerate(extra))
    return render("softmax", scalar=scalar, include=("rows",), BODY=body, INIT=init,
                  MERGE=_MERGE_SUMS if sh.kind == "sum" else _MERGE_ONLINE,
                  REDUCE=_REDUCE_SUBGROUP if subgroups else _REDUCE_WORKGROUP,
                  SG_ARGS=_SG_ARGS if subgroups else "",
                  VLID="subgroup_vlid(lid, sg_lane, sg_size)" if subgroups else "lid",
                  IN_TYPE=io_type, OUT_TYPE=io_type, PARTS=bindings, CONFIG=str(2 + len(extra)))


def use_subgroups(dev: Any) -> bool:
    return "subgroup" in dev.features and not config.flag("RUMUS_WGPU_NO_SUBGROUPS")


def plan_for(dev: Any, rows: Rows, per: int, split: bool = True) -> RowPlan:
    """row_plan.py's plan for these rows (`per` elements a load) on this device; split False: one pass."""
    outer = bool(rows.rstr) and rows.rstr[-1] != 1
    return plan_rows(rows.rows, rows.rlen, per, outer, dev.max_groups, None if split else 0)


def launch(dev: Any, op: str | RowOp, out: TensorArg, x: TensorArg, y: TensorArg | None, dim: int,
           columns: Sequence[TensorArg] = (), params: Sequence[float] = (), keep: tuple[str, ...] = (),
           kept: Any = None, column_groups: tuple[int, int] = (1, 1)) -> Any:
    """Record `op` (a name of the row-op table, or an entry) over rows along `dim` of x (and y, laid out
    as x: the backward ops' second input; columns: the op's column operands, contiguous, one element per
    place in the row; params: its parameters' values; keep: per-row expressions stored as f32 into the
    buffer `kept`, len(keep) per row in row order; column_groups: (G, S) of an op with grouped columns,
    whose column operands are G * row length / S long). Ops over [out, x] alone return what `cached` keeps:
    (program, uniform, grid) when it was one dispatch, else a replay(out buffer, x buffer) of the launch;
    the others replay(out, x, y, tail) (`planned`)."""
    sh = _shader(op, keep)
    if not x.shape:  # a 0-d tensor is a row of one element
        x = TensorArg(x.buffer, (1,), (1,), x.offset, x.dtype)
        out = TensorArg(out.buffer, (1,), (1,), out.offset, out.dtype)
        y = TensorArg(y.buffer, (1,), (1,), y.offset, y.dtype) if y is not None else None
    if len(columns) != sh.columns or len(params) != len(sh.params):
        raise RumusError(f"wgpu {op}: {sh.columns} column operands and {len(sh.params)} parameters, got "
                         f"{len(columns)} and {len(params)}")
    col_groups, inner = column_groups if sh.grouped else (1, 1)
    if col_groups < 1 or inner < 1 or x.shape[dim] % inner:
        raise RumusError(f"wgpu {op}: column groups {column_groups} do not fit rows of {x.shape[dim]}")
    ncol = col_groups * (x.shape[dim] // inner)
    for c in columns:
        if c.dtype != x.dtype or c.numel != ncol:
            raise RumusError(f"wgpu {op}: a column operand must be {ncol} elements of {x.dtype.name}, got "
                             f"{c.numel} of {c.dtype.name}")
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
    vec = (not sh.grouped and vec_rows(rows, x.dtype) and rows.out_rstride == 1 and rows.out_offset % 4 == 0
           and all(s % 4 == 0 for s in rows.kout) and rows.in1_delta % 4 == 0
           and all(c.offset % 4 == 0 for c in columns))
    split = len(sh.walks) == 1 and not keep  # a later walk needs the whole row's earlier values: one pass
    plan = plan_for(dev, rows, 4 if vec else 1, split)
    # contiguous rows that vec4 does not fit (an odd length, an offset view): the fold walks read their
    # aligned body as vec4, so the plan is sized for vec4 loads
    aligned = (not vec and not config.flag("RUMUS_WGPU_NOVEC") and rows.rstr == [1] and not sh.columns_in_folds
               and rows.rlen >= ALIGNED_MIN and x.dtype.name in ("float32", "float16") and rows.in1_delta % 4 == 0)
    if aligned:
        plan = plan_for(dev, rows, 4, split)
    t, groups, splits, chunk = plan.group, plan.workgroups, plan.splits, plan.chunk
    gx, gy, _ = grid(groups, dev.max_groups)
    scalar = "f16" if x.dtype.name == "float16" else "f32"
    sg = use_subgroups(dev)

    def program(mode: str) -> Any:
        return dev.programs.get(("softmax", op, x.dtype.name, vec, mode, plan.unroll, aligned, keep, sg),
                                lambda: softmax_source(op, scalar, vec, mode, sg, plan.unroll, aligned, keep))
    col_words = [*(c.offset for c in columns), *([0] * (2 - len(columns)))]
    col_words += [col_groups, inner] if sh.grouped else []  # cfg.col_off.zw
    data = rows.pack(t, gx, chunk if splits > 1 else rows.rlen, splits if splits > 1 else 0, params, col_words)
    passes = [program("single")] if splits == 1 else [program("partial"), program("final")]
    cols = [c.buffer for c in columns] + ([kept] if keep else [])

    def replay(ob: Any, xb: Any, yb: Any = None, tail: Sequence[Any] | None = None) -> None:
        """Record the launch on these buffers (`cached` and `planned` replay it for the same layouts); tail:
        the column operands' buffers and `kept`, where they differ from the first launch's."""
        ins = [xb] + ([yb] if yb is not None else [])
        cols_ = cols if tail is None else list(tail)
        views = ins if aligned else []  # an aligned fold pass binds the inputs again as vec4
        if splits == 1:
            dev.recorder.dispatch(passes[0], [ob, *ins, *views, *cols_], data, (gx, gy, 1))
            return
        parts = new_buffer(dev, rows.rows * splits * 8, "softmax partials")
        dev.recorder.dispatch(passes[0], [ob, *ins, parts, *views, *cols_], data, (gx, gy, splits))
        dev.recorder.dispatch(passes[1], [ob, *ins, parts, *cols_], data, (gx, gy, splits))
    replay(out.buffer, x.buffer, y.buffer if y is not None else None)
    if y is not None or columns or keep:
        return replay
    if splits == 1 and not aligned:
        return passes[0], data, (gx, gy, 1)
    return replay


def planned(dev: Any, key: Hashable, first: Callable[[], Any], *buffers: Any) -> None:
    """Replay the launch cached for `key` (the operands' layouts, attrs and the switches: see `layouts`) on
    these buffers (out, x, y, tail: launch's replay), or record `first()` (a launch returning its replay)
    and keep it: the launches of a training loop's layouts skip the planning on the host."""
    hit = dev.launch_plans.get(key)
    if hit is not None:
        hit(*buffers)
        return
    remember(dev.launch_plans, key, first())


def layouts(*args: TensorArg) -> tuple[Any, ...]:
    """What a cached row launch depends on besides its attrs: the operands' layouts and the switches."""
    return (*((a.shape, a.strides, a.offset, a.dtype) for a in args), env_set(NOVEC), env_set(NO_SUBGROUPS),
            plan_key())


def softmax_kernel(op: str) -> Any:
    def kernel(dev: Any, out: TensorArg, x: TensorArg, attrs: Mapping[str, Any]) -> Any:
        return launch(dev, op, out, x, None, int(attrs.get("dim", 0)))
    return cached(op, kernel, plan_key)


def backward_kernel(op: str) -> Any:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        dx = outputs[0]
        if dx.numel == 0:
            return
        dev = device_of(outputs, inputs)
        (g, y), _ = dealias(dev, outputs, list(inputs))
        launch(dev, op, dx, g, y, int(attrs.get("dim", 0)))
    return kernel


def columns_kernel(op: str) -> Any:
    """An op over (x, *columns) (layer / RMS norm: x, weight[, bias]) whose rows are x's trailing dims,
    as many elements as a column operand has (the normalized shape), its params from the attrs."""
    params = ROW_OPS[op].params

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        out = outputs[0]
        if out.numel == 0:
            return
        dev = device_of(outputs, inputs)
        args, _ = dealias(dev, outputs, list(inputs))
        x, cols = args[0], args[1:]
        n = cols[0].numel
        for a in (out, x, *cols):
            if any(d > 1 and st != want for d, st, want in zip(a.shape, a.strides, contiguous_strides(a.shape))):
                raise RumusError(f"wgpu {op}: its operands are contiguous (the schema says so), got strides "
                                 f"{a.strides} for shape {a.shape}")
        shape, strides = (x.numel // n, n), (n, 1)
        values = [float(attrs.get(name, default)) for name, default in params]
        planned(dev, (op, *layouts(out, x, *cols), *values),
                lambda: launch(dev, op, TensorArg(out.buffer, shape, strides, out.offset, out.dtype),
                               TensorArg(x.buffer, shape, strides, x.offset, x.dtype), None, 1,
                               [TensorArg(c.buffer, (n,), (1,), c.offset, c.dtype) for c in cols], values),
                out.buffer, x.buffer, None, [c.buffer for c in cols])
    return kernel


def _renders(op: str) -> bool:
    try:
        row_shader(op)
    except Unsupported:
        return False
    return True


def kernels() -> dict[str, Any]:
    """A kernel for every op of the row-op table whose passes the row shader holds: one input (forward
    ops), the backward ops' (grad, y), or one input and its column operands (the norms' forward; a norm's
    backward has weight gradients too: nn_norm.py runs its table entry)."""
    table = {}
    for op in filter(_renders, ROW_OPS):
        entry = ROW_OPS[op]
        if entry.grouped_columns:  # group norm's (sample, group) rows: nn_norm.py
            continue
        if len(entry.inputs) == 1:
            table[op] = columns_kernel(op) if entry.columns else softmax_kernel(op)
        elif not entry.columns and op.endswith("_backward"):  # the table's (grad, y) backward ops
            table[op] = backward_kernel(op)
    return table

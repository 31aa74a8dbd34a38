"""Fused cross-entropy forward / backward on the GPU: the row-op table's cross_entropy_fwd and
cross_entropy_bwd (rumus_contracts/ops/row_ops.py), rendered by row_wgsl.index_shader into
shaders/cross_entropy.wgsl; one row pass each (label_smoothing's sum of w (lse - x), which needs the
row's lse, folds into the forward's one walk split at the row's first logit x0: W (lse - x0) - sum
w (x - x0), row_wgsl._affine).

float32 and float16, math in f32. A group of invocations per row sized for about four loads each
(row_plan.group_for, as softmax.py: short rows pack many per workgroup, long rows get a whole one), vec4
loads and stores when the class count and the row starts are multiples of 4. Targets are int64 or int32;
one outside 0..C-1 that is not ignore_index sets this op's bit of the device's index error flag
(indexing.py), raised as IndexOutOfRange at the next host read, so the op never waits for the GPU (the
table's at() reads 0 there: never a read out of bounds). The group merges through workgroup memory in a
fixed tree: results are the same on every run. A 0-d weight tensor means no class weights (all 1). The
backward's wsum, the sum of the class weights, is folded by each row's group when weighted and smoothed
(the table takes it as a param; the kernel derives it without a host read).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg
from rumus_contracts.ops.row_ops import RowOp
from rumus_contracts.ops.row_wgsl import IndexShader, IndexWalk, index_shader

from .indexing import OP_BITS, _error_flag
from .layout import dealias, device_of, f32_bits, grid
from .pipelines import render, wgsl_scalar
from .row_plan import WORKGROUP, group_for

_READ_INDEX = {"int64": ("vec2<u32>", "{a}[{off} + r]"),
               "int32": ("i32", "vec2<u32>(bitcast<u32>({a}[{off} + r]), select(0u, 0xffffffffu, {a}[{off} + r] < 0))")}
_ACCESS_VEC = """fn x_at(e: u32) -> f32 { return f32(x[e / 4u][e % 4u]); }
fn x_vec(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }"""
_ACCESS_SCALAR = """fn x_at(e: u32) -> f32 { return f32(x[e]); }"""
# the element stores of an op whose output is row-shaped
_STORE_VEC = """fn out_at(e: u32, v: f32) { out0[e / 4u][e % 4u] = scalar(v); }
fn out_vec(i: u32, v: vec4<f32>) { out0[i] = vec4<scalar>(v); }"""
_STORE_SCALAR = """fn out_at(e: u32, v: f32) { out0[e] = scalar(v); }"""
_OFFSETS = ("x", "y", "z", "w")
# the backward's wsum where the classes are weighted and smoothed: the row's group folds the weights
_WSUM = """    if (WEIGHTED && label_smoothing != 0.0) {
        var part = 0.0;
        for (var j = lane; j < cfg.classes; j += cfg.group) {
            part += c0_at(j);
        }
        wsum = reduce_group(lid, lane, cfg.group, vec4<f32>(ninf, 0.0, part, 0.0), ninf).z;
        workgroupBarrier();
    }"""


def _walk(sh: IndexShader, wk: IndexWalk, vec: bool, first: bool) -> list[str]:
    """One walk's fold loop, the group's merge and its binds."""
    e = wk.element
    if vec:
        comps = [sh.element(e, k) for k in range(4)]
        if wk.kind == "online":
            value = "v" if e == "X_" else f"vec4<f32>({', '.join(comps)})"
            fold = f"acc = fold4(acc, {value}, ninf);"
        else:
            fold = f"acc.z += ({comps[0]} + {comps[1]}) + ({comps[2]} + {comps[3]});"
        if wk.split:  # a later sum pass folded in (row_wgsl._affine): its two sums in acc.z and acc.w
            z, w = ([sh.element(code, k) for k in range(4)] for code in wk.split)  # per component
            fold += (f" if ({wk.split_when}) {{ acc.z += ({z[0]} + {z[1]}) + ({z[2]} + {z[3]}); "
                     f"acc.w += ({w[0]} + {w[1]}) + ({w[2]} + {w[3]}); }}")
        cols = "C0_" in e or any("C0_" in code for code in wk.split)
        loads = "let v = x_vec((row + j) / 4u);" + (" let cv = c0_vec(j);" if cols else "")
        loop = f"for (var j = lane * 4u; j < end; j += cfg.group * 4u) {{ {loads} {fold} }}"
    else:
        one = sh.element(e)
        fold = f"acc = fold1(acc, {one}, ninf);" if wk.kind == "online" else f"acc.z += {one};"
        if wk.split:
            zs, ws = (sh.element(code) for code in wk.split)
            fold += f" if ({wk.split_when}) {{ acc.z += {zs}; acc.w += {ws}; }}"
        cols = "C0_" in e or any("C0_" in code for code in wk.split)
        loads = "let x = x_at(row + j);" + (" let c0 = c0_at(j);" if cols else "")
        loop = f"for (var j = lane; j < end; j += cfg.group) {{ {loads} {fold} }}"
    end = f"select(0u, nn, {wk.when})" if wk.when and not wk.uniform else "nn"
    code = [] if first else ["    workgroupBarrier();  // the merge slots are read until every invocation has its pair",
                             "    acc = vec4<f32>(ninf, 0.0, 0.0, 0.0);"]
    if wk.split:  # the split's shift: the row's first element (none in an empty row)
        code += ["    var x0 = 0.0;", "    if (nn > 0u) {", "        x0 = x_at(row);", "    }"]
    code += ["    {", f"        let end = {end};", f"        {loop}", "    }",
             "    acc = reduce_group(lid, lane, cfg.group, acc, ninf);"]
    if wk.kind == "sum":
        if wk.when and wk.uniform:  # every invocation skips the walk and its merge alike
            return [f"    var {wk.value} = 0.0;", f"    if ({wk.when}) {{",
                    *("    " + line for line in code), f"        {wk.value} = acc.z;", "    }",
                    *([f"    {wk.bind}"] if wk.bind else [])]
        code.append(f"    let {wk.value} = acc.z;")
    return code + ([f"    {wk.bind}"] if wk.bind else [])


def _body(sh: IndexShader, vec: bool, index_type: str) -> tuple[str, str]:
    """(main's body, the bindings after binding 3): the params, the row inputs (an index checked
    against the row), zero_if, the walks, the lets and the stores."""
    decls, lines = [], []
    for k, p in enumerate(sh.params):
        value = "cfg.ignore_i32" if p in sh.index_params else f"cfg.param.{_OFFSETS[k]}"
        lines.append(f"    {'var' if p == 'wsum' else 'let'} {p} = {value};")
    if "wsum" in sh.params:
        lines.append(_WSUM)
    binding = 4
    for k, (name, kind) in enumerate(sh.row_inputs):
        off = f"cfg.rin_off.{_OFFSETS[k]}"
        if kind == "int64":
            typ, read = _READ_INDEX[index_type]
            lines += [f"    let {name} = index_of({read.format(a=f'rin{k}', off=off)});",
                      f"    if (valid && lane == 0u) {{ check_index({name}); }}"]
        else:
            typ = "scalar"
            lines.append(f"    let {name} = f32(rin{k}[{off} + r]);")
        decls.append(f"@group(0) @binding({binding}) var<storage, read> rin{k}: array<{typ}>;")
        binding += 1
    for k in range(len(sh.row_outputs)):
        decls.append(f"@group(0) @binding({binding}) var<storage, read_write> rout{k}: array<scalar>;")
        binding += 1
    decls.append(f"@group(0) @binding({binding}) var<uniform> cfg: Config;")
    zero = sh.zero or "false"
    lines.append(f"    let zero = {zero};  // the table's zero_if: the row is not walked and writes 0")
    for i, wk in enumerate(sh.walks):
        lines += _walk(sh, wk, vec, i == 0)
    if sh.lets:
        lines.append(f"    {sh.lets}")
    if sh.per_row:
        stores = [f"        out0[cfg.o_off + r] = scalar(select({sh.out}, 0.0, zero));"]
        stores += [f"        rout{k}[cfg.rout_off.{_OFFSETS[k]} + r] = scalar(select({o}, 0.0, zero));"
                   for k, o in enumerate(sh.row_outputs)]
        lines += ["    if (valid && lane == 0u) {", *stores, "    }"]
    else:
        # an ignored row is 0 even where its logits are infinite (0 * inf would be NaN)
        lines.append("    let orow = cfg.o_off + r * cfg.classes;")
        if vec:
            comps = ", ".join(sh.element(sh.out, k) for k in range(4))
            cv = " let cv = c0_vec(j);" if "C0_" in sh.out else ""
            lines.append(f"    for (var j = lane * 4u; j < nn; j += cfg.group * 4u) {{ "
                         f"let v = x_vec((row + j) / 4u);{cv} "
                         f"out_vec((orow + j) / 4u, select(vec4<f32>({comps}), vec4<f32>(0.0), zero)); }}")
        else:
            c0 = " let c0 = c0_at(j);" if "C0_" in sh.out else ""
            lines.append(f"    for (var j = lane; j < nn; j += cfg.group) {{ let x = x_at(row + j);{c0} "
                         f"out_at(orow + j, select({sh.element(sh.out)}, 0.0, zero)); }}")
    return "\n".join(lines), "\n".join(decls)


def source(op: str | RowOp, scalar: str, vec: bool, weighted: bool, index_type: str) -> str:
    """The WGSL of table op `op` (cross_entropy_fwd or cross_entropy_bwd)."""
    sh = index_shader(op)
    body, bindings = _body(sh, vec, index_type)
    io = "vec4<scalar>" if vec else "scalar"
    access = _ACCESS_VEC if vec else _ACCESS_SCALAR
    if not sh.per_row:
        access += "\n" + (_STORE_VEC if vec else _STORE_SCALAR)
    flag = {True: "true", False: "false"}
    return render("cross_entropy", scalar=scalar, VEC=flag[vec], WEIGHTED=flag[weighted],
                  OUT="scalar" if sh.per_row else io, IO=io, ACCESS=access, BINDINGS=bindings, BODY=body)


def _launch(op: str, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dev = device_of(outputs, inputs)
    ins, _ = dealias(dev, outputs, list(inputs))
    if op == "cross_entropy_fwd":
        (x, t, w), (first, lse) = ins, outputs
        row_ins, row_outs = [t], [lse]
    else:
        g, x, t, w, lse = ins
        first = outputs[0]
        row_ins, row_outs = [g, t, lse], []
    rows, classes = x.shape
    if rows == 0:
        return
    if classes >= 1 << 31:
        raise RumusError(f"wgpu {op}: at most 2**31 - 1 classes, got {classes}")
    sh = index_shader(op)
    weighted = bool(w.shape)
    vec = classes % 4 == 0 and x.offset % 4 == 0 and (sh.per_row or first.offset % 4 == 0)
    ignore = int(attrs["ignore_index"])
    words = ignore & 0xFFFFFFFFFFFFFFFF
    ignore32 = ignore if -(1 << 31) <= ignore < 1 << 31 else -(1 << 31)
    params = [float(attrs.get(p, 0.0)) for p in sh.params]
    if "wsum" in sh.params:  # the unweighted sum of weights; weighted, the kernel folds it
        params[sh.params.index("wsum")] = float(classes)
    params += [0.0] * (4 - len(params))
    t_size = group_for(rows, classes, 4 if vec else 1, False)  # softmax's group (row_plan.py)
    per = WORKGROUP // t_size
    gx, gy, _ = grid((rows + per - 1) // per, dev.max_groups)
    key = ("cross_entropy", op, x.dtype.name, vec, weighted, t.dtype.name)
    prog = dev.programs.get(key, lambda: source(op, wgsl_scalar(x.dtype), vec, weighted, t.dtype.name))
    rin = [a.offset for a in row_ins] + [0] * (4 - len(row_ins))
    rout = [a.offset for a in row_outs] + [0] * (4 - len(row_outs))
    data = struct.pack("<10Ii I4f8I", rows, classes, t_size, gx, x.offset, first.offset, w.offset,
                       OP_BITS["cross_entropy"], words & 0xFFFFFFFF, words >> 32, ignore32,
                       f32_bits(float("-inf")), *params, *rin, *rout)
    buffers = [first.buffer, x.buffer, w.buffer, _error_flag(dev), *(a.buffer for a in row_ins),
               *(a.buffer for a in row_outs)]
    dev.recorder.dispatch(prog, buffers, data, (gx, gy, 1))


def cross_entropy_fwd(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("cross_entropy_fwd", outputs, inputs, attrs)


def cross_entropy_bwd(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("cross_entropy_bwd", outputs, inputs, attrs)


def kernels() -> dict[str, Any]:
    return {"cross_entropy_fwd": cross_entropy_fwd, "cross_entropy_bwd": cross_entropy_bwd}

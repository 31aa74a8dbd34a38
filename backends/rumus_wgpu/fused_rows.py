"""Fused row kernels for rm.compile on WebGPU: an elementwise chain feeding a row op, one WGSL shader.

The row op comes from the row-op table (row_ops.py) with its input x substituted by the chain: every
element expression of its passes, finalize and output is rendered (row_wgsl.py's renderer) over `xv`,
the chain's value at that element, which the shader computes from the chain's inputs (each through its
own strides, broadcasts included) with the step functions an elementwise fusion renders (fused.py), so
x is never stored. One workgroup takes one row: its invocations walk the row, each pass folds their
values through workgroup memory, the chain values that must be kept are stored during the first pass.
Any sequence of max / sum passes, lets between them, column operands (a norm's weight and bias) and
parameters (inlined as exact f32 bit patterns) renders, so softmax, log_softmax, layer_norm and
rms_norm all fuse. The fold order is the shader's own: results match the unfused kernels to float32
rounding, not bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, RumusError, ShaderKernel, TensorArg
from rumus_contracts.backend import FusedRowProgram
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.expr_wgsl import _DEPENDS, HELPERS
from rumus_contracts.ops.row_ops import ROW_OPS, split_lets
from rumus_contracts.ops.row_wgsl import _expr

from .fused import MAX_BINDINGS, MAX_DIMS, _f32_bits, _step_fn
from .layout import device_of
from .shader_kernel import adapt

_WG = 64  # invocations per workgroup, at least


def _operand_base(k: int) -> int:
    """Word of chain operand k's offset (then its stride along the row, then its leading strides)."""
    return 3 + MAX_DIMS + k * (2 + MAX_DIMS)


def render(program: FusedRowProgram, t: int) -> str:
    """The shader with `t` invocations per row (a power of two; several rows a workgroup when t < _WG)."""
    wg = max(t, _WG)
    chain = program.chain
    if chain.dtype.name != "float32":
        raise Unsupported(f"fusion of {chain.dtype.name} chains into a row op on WebGPU")
    op = ROW_OPS.get(program.op)
    # a fused row reads column i at element i: not grouped columns
    if op is None or len(op.inputs) != 1 or not op.passes or op.grouped_columns:
        raise Unsupported(f"fusion into {program.op}")
    n_out, n_in, ncol = 1 + len(chain.outputs), chain.n_inputs, len(op.columns)
    nops = n_out + n_in
    if nops + ncol > MAX_BINDINGS:
        raise Unsupported(f"{nops + ncol} operands exceed {MAX_BINDINGS} storage bindings")
    fns = "".join(_step_fn(j, name, params) for j, (name, _, params) in enumerate(chain.steps))
    used = [h for h in HELPERS if f"{h}(" in fns]
    used = [*dict.fromkeys(d for h in used for d in (*_DEPENDS.get(h, ()), h))]
    scope = {"x": "xv", "n": "nf", **{c: f"c{k}v" for k, c in enumerate(op.columns)},
             **{p: _f32_bits(v) for (p, _), v in zip(op.params, program.params)}}

    def element(store: bool) -> list[str]:
        lines = [f"let a{k} = b{n_out + k}[of{n_out + k} + i * st{n_out + k}];" for k in range(n_in)]
        for j, (_, refs, _) in enumerate(chain.steps):
            args = ", ".join(f"a{r}" if r < n_in else f"v{r - n_in}" for r in refs)
            lines.append(f"let v{j} = s{j}({args});")
        if store:
            lines += [f"b{1 + k}[of{1 + k} + i * st{1 + k}] = v{j};" for k, j in enumerate(chain.outputs)]
        lines.append(f"let xv = v{len(chain.steps) - 1};")
        lines += [f"let c{k}v = b{nops + k}[word({_operand_base(nops) + k}u) + i];" for k in range(ncol)]
        return lines

    def lets(src: str) -> list[str]:
        out = []
        for name, expr in split_lets(src):
            out.append(f"let r_{name} = {_expr(expr, scope)};")
            scope[name] = f"r_{name}"
        return out

    # a row past the last takes no element, but still meets every barrier of its workgroup
    body = [f"    let row = (wid.x + wid.y * nwg.x) * {wg // t}u + lid / {t}u;", f"    let lane = lid % {t}u;",
            "    let n = select(0u, word(1u), row < word(0u));", "    let nf = f32(n);",
            "    var rest = min(row, word(0u) - 1u);",
            *(f"    var of{k} = word({_operand_base(k)}u);" for k in range(nops)),
            f"    for (var d = min(word(2u), {MAX_DIMS}u); d > 0u; d--) {{",
            "        let size = word(2u + d);", "        let q = rest % size;", "        rest = rest / size;",
            *(f"        of{k} += q * word({_operand_base(k) + 1}u + d);" for k in range(nops)),
            "    }",
            *(f"    let st{k} = word({_operand_base(k) + 1}u);" for k in range(nops))]
    for k, p in enumerate(op.passes):
        el = _expr(p.element, scope)
        fold = "acc + el" if p.reduce == "sum" else "select(acc, el, el > acc || is_nan(el))"
        body += [f"    var acc{k} = {'0.0' if p.reduce == 'sum' else '-bitcast<f32>(0x7f800000u)'};",
                 f"    for (var i = lane; i < n; i += {t}u) {{",
                 *("        " + s for s in element(k == 0)),
                 f"        let el = {el};", f"        let acc = acc{k};", f"        acc{k} = {fold};", "    }",
                 f"    let r_{p.value} = reduce_{p.reduce}(lid, lane, acc{k});"]
        scope[p.value] = f"r_{p.value}"
        body += ["    " + s for s in lets(p.then)]
    body += ["    " + s for s in lets(op.finalize)]
    e = _expr(op.passes[-1].element, scope)
    body += [f"    for (var i = lane; i < n; i += {t}u) {{", *("        " + s for s in element(False)),
             *(["        let ev = " + e + ";"] if op.uses_e() else []),
             f"        b0[of0 + i * st0] = {_expr(op.out, {**scope, 'e': 'ev'})};", "    }"]
    words = _operand_base(nops) + ncol
    lines = [f"struct Cfg {{ w: array<vec4<u32>, {(words + 3) // 4}> }}",
             *(f"@group(0) @binding({k}) var<storage, read_write> b{k}: array<f32>;" for k in range(n_out)),
             *(f"@group(0) @binding({k}) var<storage, read> b{k}: array<f32>;" for k in range(n_out, nops + ncol)),
             f"@group(0) @binding({nops + ncol}) var<uniform> cfg: Cfg;",
             "fn word(i: u32) -> u32 { return cfg.w[i / 4u][i % 4u]; }",
             *(HELPERS[h] for h in used), fns, _IS_NAN,
             *([f"var<workgroup> red: array<f32, {wg}>;", _REDUCE.format(t=t)] if t > 1 else [_ALONE]),
             f"@compute @workgroup_size({wg})",
             "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, "
             "@builtin(local_invocation_index) lid: u32) {", *body, "}"]
    return "\n".join(lines) + "\n"


# WGSL leaves comparisons with NaN to the compiler: a NaN is told from its bits (as reduce.py does)
_IS_NAN = """
fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
"""
# a tree over the row's slots of workgroup memory; every invocation of the row returns the row's value
# (NaN propagates through max)
_REDUCE = """
fn reduce_sum(lid: u32, lane: u32, v: f32) -> f32 {{
    red[lid] = v;
    workgroupBarrier();
    for (var h = {t}u / 2u; h > 0u; h = h / 2u) {{
        if (lane < h) {{
            red[lid] = red[lid] + red[lid + h];
        }}
        workgroupBarrier();
    }}
    let r = red[lid - lane];
    workgroupBarrier();
    return r;
}}

fn reduce_max(lid: u32, lane: u32, v: f32) -> f32 {{
    red[lid] = v;
    workgroupBarrier();
    for (var h = {t}u / 2u; h > 0u; h = h / 2u) {{
        if (lane < h) {{
            let a = red[lid];
            let b = red[lid + h];
            red[lid] = select(a, b, b > a || is_nan(b));
        }}
        workgroupBarrier();
    }}
    let r = red[lid - lane];
    workgroupBarrier();
    return r;
}}
"""
# one invocation per row: its own value is the row's (no workgroup memory, no barrier)
_ALONE = """
fn reduce_sum(lid: u32, lane: u32, v: f32) -> f32 { return v; }
fn reduce_max(lid: u32, lane: u32, v: f32) -> f32 { return v; }
"""


def _params(n_chain: int, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg]) -> list[int]:
    args = [*outputs, *inputs[:n_chain - len(outputs)]]
    cols = inputs[n_chain - len(outputs):]
    shape = args[0].shape
    if any(a.shape != shape for a in args) or any(s < 0 for a in args for s in a.strides):
        raise RumusError("a fused WebGPU row kernel takes operands of one shape with non-negative strides; run "
                         "with rm.compile(fn, fuse=False)")
    dims: list[tuple[int, list[int]]] = []
    for d, size in enumerate(shape[:-1]):  # merge leading dims every operand walks contiguously
        if size == 1:
            continue
        st = [a.strides[d] for a in args]
        if dims and all(p == s * size for p, s in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * size, st)
        else:
            dims.append((size, st))
    if len(dims) > MAX_DIMS:
        raise RumusError(f"a fused WebGPU row kernel walks at most {MAX_DIMS} leading dims, this layout has "
                         f"{len(dims)}: run with rm.compile(fn, fuse=False)")
    rows = 1
    for size in shape[:-1]:
        rows *= size
    words = [rows, shape[-1], len(dims), *(s for s, _ in dims), *([1] * (MAX_DIMS - len(dims)))]
    for k, a in enumerate(args):
        words += [a.offset, a.strides[-1], *(st[k] for _, st in dims), *([0] * (MAX_DIMS - len(dims)))]
    words += [c.offset for c in cols]
    return words + [0] * (-len(words) % 4)


def group_size(n: int, cpu: bool) -> int:
    """Invocations per row of length n: about `_PER` elements each, at most 256; one on a CPU adapter
    (lavapipe runs a workgroup's invocations as the SIMD lanes of one thread, where a barrier costs more
    than the shared fold saves: measured with benchmarks/compile_row_fusion.py)."""
    t = 1
    while not cpu and t < 256 and t * _PER < n:
        t *= 2
    return t


_PER = 16


def compile_fused_row(program: FusedRowProgram) -> Kernel:
    """`WgpuBackend.compile_fused_row`: kernel([y, *chain outputs], [*chain inputs, *columns], {})."""
    n_chain = 1 + len(program.chain.outputs) + program.chain.n_inputs
    render(program, 1)  # Unsupported now, not at the first call
    kernels: dict[int, Kernel] = {}
    state: dict[str, bool] = {}

    def params(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int]:
        return _params(n_chain, outputs, inputs)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        shape = outputs[0].shape
        if 0 in shape:
            return
        cpu = state.get("cpu")
        if cpu is None:
            info = getattr(device_of(outputs, inputs).adapter, "info", {})
            cpu = state["cpu"] = str(info.get("adapter_type", "")).lower() == "cpu"
        t = group_size(shape[-1], cpu)
        k = kernels.get(t)
        if k is None:
            per_wg = max(t, _WG) // t

            def workgroups(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]
                           ) -> tuple[int, int, int]:
                rows = 1
                for size in outputs[0].shape[:-1]:
                    rows *= size
                groups = (rows + per_wg - 1) // per_wg
                x = min(groups, 65535)
                return (x, (groups + x - 1) // x, 1)
            k = kernels[t] = adapt(ShaderKernel("wgsl", render(program, t), "main", workgroups, params))
        k(outputs, inputs, attrs)

    return kernel

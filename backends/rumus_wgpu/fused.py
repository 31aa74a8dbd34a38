"""Fused elementwise kernels for rm.compile on WebGPU: one WGSL shader per chain of table ops.

Each step of a `FusedProgram` becomes a WGSL function rendered by expr_wgsl from the same expression
the unfused kernel uses (parameters inlined as exact f32 bit patterns); the shader walks the output's
N-d index once per element, loads every input through its own strides and offset, evaluates the steps
in registers and stores the outputs. The shader goes through the ShaderKernel path (`adapt`), so its
pipeline, uniforms and recording are the ones every plugin kernel uses.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, RumusError, ShaderKernel, TensorArg
from rumus_contracts.backend import FusedProgram
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.expr_wgsl import _DEPENDS, HELPERS, WgslRenderer
from rumus_contracts.ops.expressions import all_kernels

from .shader_kernel import adapt

MAX_DIMS = 8  # merged dims a fused shader indexes (a layout needing more is refused when it arrives)
MAX_BINDINGS = 8  # storage buffers per shader stage that every WebGPU adapter offers
WG = 64
_TABLE = all_kernels()


def _f32_bits(v: float) -> str:
    return f"bitcast<f32>({struct.unpack('<I', struct.pack('<f', v))[0]}u)"


def _step_fn(j: int, op: str, params: tuple[float, ...]) -> str:
    e = _TABLE[op]
    r = WgslRenderer("f")
    lets, (res, typ) = r.render(e.body, {**{n: n for n in e.inputs},
                                         **{p: _f32_bits(v) for p, v in zip(e.params, params)}})
    if typ == "c":
        res = r.const(float(res))
    if typ == "bool":
        raise Unsupported(f"{op} has a bool result")
    args = ", ".join(f"{n}: f32" for n in e.inputs)
    body = "".join(f"    let {n} = {v};\n" for n, v, _ in lets)
    return f"fn s{j}({args}) -> f32 {{\n{body}    return {res};\n}}\n"


def render(program: FusedProgram) -> str:
    if program.dtype.name != "float32":
        raise Unsupported(f"fusion of {program.dtype.name} chains on WebGPU")
    n_out, n_in = len(program.outputs), program.n_inputs
    nops = n_out + n_in
    if nops > MAX_BINDINGS:
        raise Unsupported(f"{nops} operands exceed {MAX_BINDINGS} storage bindings")
    fns = [_step_fn(j, op, params) for j, (op, _, params) in enumerate(program.steps)]
    text = "".join(fns)
    used = [h for h in HELPERS if f"{h}(" in text]
    used = [*dict.fromkeys(d for h in used for d in (*_DEPENDS.get(h, ()), h))]
    words = 2 + MAX_DIMS + nops * (1 + MAX_DIMS)
    lines = [f"struct Cfg {{ w: array<vec4<u32>, {(words + 3) // 4}> }}"]
    lines += [f"@group(0) @binding({k}) var<storage, read_write> b{k}: array<f32>;" for k in range(n_out)]
    lines += [f"@group(0) @binding({k}) var<storage, read> b{k}: array<f32>;" for k in range(n_out, nops)]
    lines += [f"@group(0) @binding({nops}) var<uniform> cfg: Cfg;",
              "fn word(i: u32) -> u32 { return cfg.w[i / 4u][i % 4u]; }",
              *(HELPERS[h] for h in used), text]
    body = [f"    let i = gid.x + gid.y * nwg.x * {WG}u;", "    if (i >= word(0u)) { return; }",
            *(f"    var o{k} = word({2 + MAX_DIMS + k * (1 + MAX_DIMS)}u);" for k in range(nops)),
            "    var rest = i;",
            f"    for (var d = min(word(1u), {MAX_DIMS}u); d > 0u; d--) {{",
            "        let size = word(1u + d);", "        let q = rest % size;", "        rest = rest / size;",
            *(f"        o{k} += q * word({2 + MAX_DIMS + k * (1 + MAX_DIMS)}u + d);" for k in range(nops)),
            "    }",
            *(f"    let a{k} = b{n_out + k}[o{n_out + k}];" for k in range(n_in))]
    for j, (_, refs, _) in enumerate(program.steps):
        args = ", ".join(f"a{r}" if r < n_in else f"v{r - n_in}" for r in refs)
        body.append(f"    let v{j} = s{j}({args});")
    body += [f"    b{k}[o{k}] = v{j};" for k, j in enumerate(program.outputs)]
    lines += [f"@compute @workgroup_size({WG})",
              "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
              "@builtin(num_workgroups) nwg: vec3<u32>) {", *body, "}"]
    return "\n".join(lines) + "\n"


def _params(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int]:
    args = [*outputs, *inputs]
    shape = args[0].shape
    dims: list[tuple[int, list[int]]] = []
    for d, n in enumerate(shape):  # merge dims every operand walks contiguously (fewer divisions)
        if n == 1:
            continue
        st = [a.strides[d] for a in args]
        if dims and all(p == s * n for p, s in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * n, st)
        else:
            dims.append((n, st))
    if len(dims) > MAX_DIMS or any(s < 0 for _, st in dims for s in st):
        raise RumusError(f"a fused WebGPU kernel walks at most {MAX_DIMS} dims with non-negative strides; this "
                         f"layout has {len(dims)}: run with rm.compile(fn, fuse=False)")
    numel = 1
    for n in shape:
        numel *= n
    words = [numel, len(dims), *(n for n, _ in dims), *([1] * (MAX_DIMS - len(dims)))]
    for k, a in enumerate(args):
        words += [a.offset, *(st[k] for _, st in dims), *([0] * (MAX_DIMS - len(dims)))]
    return words + [0] * (-len(words) % 4)


def _workgroups(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]
                ) -> tuple[int, int, int]:
    numel = 1
    for n in outputs[0].shape:
        numel *= n
    groups = (numel + WG - 1) // WG
    x = min(groups, 65535)
    return (x, (groups + x - 1) // x if x else 0, 1)


def compile_fused(program: FusedProgram) -> Kernel:
    return adapt(ShaderKernel("wgsl", render(program), "main", _workgroups, _params))

"""Elementwise kernels: unary math, binary arithmetic, comparisons, where, clamp, copy and fill.

One WGSL skeleton (shaders/elementwise.wgsl) serves every op: Python writes the op's expression for
the input dtype's compute kind (f32 math for float32/float16, i32, emulated int64, bool) and picks
the 1-D indexing variant when every operand coalesces to a single strided dim (the contiguous and
scalar-broadcast fast path) or the general N-D variant otherwise.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, RumusError, TensorArg

from .layout import (
    NOVEC, STORAGE_TYPE, WG, coalesce, convert, dealias, device_of, env_set, f32_bits, grid, i32_word, kind, load,
    remember, store,
)
from .pipelines import render
from .pool import WgpuBuffer

MAX_DIMS = 8
# expressions over a, b, c (the inputs in their compute kind), by compute kind
UNARY: dict[str, dict[str, str]] = {
    "neg": {"f": "-a", "i": "-a", "l": "i64_neg(a)"},
    "abs": {"f": "abs(a)", "i": "abs(a)", "l": "i64_abs(a)"},
    "relu": {"f": "max(a, 0.0)", "i": "max(a, 0)", "l": "select(a, vec2<u32>(0u), i64_is_neg(a))"},
    "exp": {"f": "exp(a)"},
    "log": {"f": "log(a)"},
    "sqrt": {"f": "sqrt(a)"},
    "rsqrt": {"f": "inverseSqrt(a)"},
    "sin": {"f": "sin(a)"},
    "cos": {"f": "cos(a)"},
    "tanh": {"f": "tanh(clamp(a, -15.0, 15.0))"},  # exp-based tanh would overflow to NaN
    "sigmoid": {"f": "1.0 / (1.0 + exp(-a))"},
}
BINARY: dict[str, dict[str, str]] = {
    "add": {"f": "a + b", "i": "a + b", "l": "i64_add(a, b)"},
    "sub": {"f": "a - b", "i": "a - b", "l": "i64_sub(a, b)"},
    "mul": {"f": "a * b", "i": "a * b", "l": "i64_mul(a, b)"},
    "div": {"f": "a / b"},
    "pow": {"f": "spow(a, b)"},
    "maximum": {"f": "max(a, b)", "i": "max(a, b)", "l": "i64_max(a, b)"},
    "minimum": {"f": "min(a, b)", "i": "min(a, b)", "l": "i64_min(a, b)"},
}
# activations (PyTorch's definitions); parameters arrive as f32 bits in cfg.p, in ACTIVATION_PARAMS order
P0, P1 = "bitcast<f32>(cfg.p.x)", "bitcast<f32>(cfg.p.y)"
ACTIVATIONS: dict[str, str] = {
    "erf": "erf_f(a)",
    "gelu": "0.5 * a * (1.0 + erf_f(a * 0.70710678118654752))",
    "gelu_tanh": "0.5 * a * (1.0 + tanh(clamp(0.79788456080286536 * (a + 0.044715 * a * a * a), -15.0, 15.0)))",
    "silu": "a / (1.0 + exp(-a))",
    "leaky_relu": f"select(a * {P0}, a, a > 0.0)",
    "softplus": f"select(log(1.0 + exp(min(a * {P0}, {P1}))) / {P0}, a, a * {P0} > {P1})",
    "elu": f"select({P0} * (exp(min(a, 0.0)) - 1.0), a, a > 0.0)",
    # fused backward ops: grad * f'(x) with a = grad, b = x
    "gelu_backward": "a * (0.5 * (1.0 + erf_f(b * 0.70710678118654752)) + b * 0.39894228040143268 * exp(-0.5 * b * b))",
    "gelu_tanh_backward": "a * gelu_tanh_grad(b)",
    "silu_backward": "a * silu_grad(b)",
    "leaky_relu_backward": f"a * select({P0}, 1.0, b > 0.0)",
    "softplus_backward": f"a * select(1.0 / (1.0 + exp(-min(b * {P0}, {P1}))), 1.0, b * {P0} > {P1})",
    "elu_backward": f"a * select({P0} * exp(min(b, 0.0)), 1.0, b > 0.0)",
}
ACTIVATION_PARAMS = {"leaky_relu": ("negative_slope",), "softplus": ("beta", "threshold"), "elu": ("alpha",)}
ACTIVATION_HELPERS = """
// erf with |error| < 1.5e-7 (Abramowitz and Stegun 7.1.26); WGSL has no erf
fn erf_f(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        * exp(-x * x);
    return select(-y, y, x >= 0.0);
}
fn gelu_tanh_grad(x: f32) -> f32 {
    let t = tanh(clamp(0.79788456080286536 * (x + 0.044715 * x * x * x), -15.0, 15.0));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.79788456080286536 * (1.0 + 0.134145 * x * x);
}
fn silu_grad(x: f32) -> f32 {
    let s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}
"""
COMPARE: dict[str, dict[str, str]] = {
    "eq": {"f": "a == b", "i": "a == b", "l": "i64_eq(a, b)"},
    "ne": {"f": "a != b", "i": "a != b", "l": "!i64_eq(a, b)"},
    "lt": {"f": "a < b", "i": "a < b", "l": "i64_lt(a, b)"},
    "le": {"f": "a <= b", "i": "a <= b", "l": "!i64_lt(b, a)"},
    "gt": {"f": "a > b", "i": "a > b", "l": "i64_lt(b, a)"},
    "ge": {"f": "a >= b", "i": "a >= b", "l": "!i64_lt(a, b)"},
}
CLAMP = {
    "f": "min(max(a, bitcast<f32>(cfg.p.x)), bitcast<f32>(cfg.p.y))",
    "i": "clamp_i(a)",
    "l": "clamp_l(a)",
}
CLAMP_HELPERS = """
fn clamp_i(a: i32) -> i32 {
    let t = select(a, bitcast<i32>(cfg.p.y), a < bitcast<i32>(cfg.p.x));
    return select(t, bitcast<i32>(cfg.p.w), t > bitcast<i32>(cfg.p.z));
}
fn clamp_l(a: vec2<u32>) -> vec2<u32> {
    let t = select(a, cfg.p.zw, i64_lt(a, cfg.p.xy));
    return select(t, cfg.q.zw, i64_lt(cfg.q.xy, t));
}
"""
FILL = {"f": "bitcast<f32>(cfg.p.x)", "i": "bitcast<i32>(cfg.p.x)", "l": "cfg.p.xy", "b": "(cfg.p.x != 0u)"}
NAMES = "abc"


class MapSpec:
    """How one op maps its inputs: expression table, operand kind rule and result kind rule."""

    def __init__(self, op: str, exprs: Mapping[str, str], result: str = "same", helpers: str = "") -> None:
        self.op, self.exprs, self.result, self.helpers = op, exprs, result, helpers


def _source(spec: MapSpec, out_dtype: DType, in_dtypes: Sequence[DType], aliases: Mapping[int, int],
            nd: bool, vec: tuple[bool, ...] | None) -> str:
    """vec: the vec4 variant (contiguous, 4 elements per invocation); per input, whether it is read as
    vec4 (stride 1) or broadcast from one element (stride 0)."""
    def array(dt: DType, wide: bool) -> str:
        t = STORAGE_TYPE[dt.name]
        return f"array<vec4<{t}>>" if wide else f"array<{t}>"
    bindings = [f"@group(0) @binding(0) var<storage, read_write> out0: {array(out_dtype, vec is not None)};"]
    slot = 1
    for k, dt in enumerate(in_dtypes):
        if k in aliases:
            continue
        wide = vec is not None and vec[k]
        bindings.append(f"@group(0) @binding({slot}) var<storage, read> in{k}: {array(dt, wide)};")
        slot += 1
    # operand kind: where's condition is bool, its values set the kind; compare bools as ints
    op_kind = kind(in_dtypes[1] if spec.op == "where" else in_dtypes[0]) if in_dtypes else kind(out_dtype)
    if spec.result == "compare" and op_kind == "b":
        op_kind = "i"
    if spec.op == "copy":
        expr, res_kind = "a", kind(in_dtypes[0])
    elif spec.op == "fill":
        expr, res_kind = FILL[kind(out_dtype)], kind(out_dtype)
    else:
        if op_kind not in spec.exprs:
            raise RumusError(f"wgpu: no {spec.op} kernel for {in_dtypes[0]}")
        expr = spec.exprs[op_kind]
        res_kind = "b" if spec.result == "compare" else op_kind
    result = store(out_dtype, convert("r", res_kind, kind(out_dtype)))

    def element(refs: Sequence[str], indent: str) -> list[str]:
        lines = []
        for k, (dt, ref) in enumerate(zip(in_dtypes, refs)):
            want = "b" if spec.op == "where" and k == 0 else op_kind
            lines.append(f"{indent}let {NAMES[k]} = {convert(load(dt, ref), kind(dt), want)};")
        return lines + [f"{indent}let r = {expr};"]

    srcs = ["out0[o.x]" if k in aliases else f"in{k}[o[{k + 1}]]" for k in range(len(in_dtypes))]
    if vec is None:
        lines = element(srcs, "    ") + [f"    out0[o.x] = {result};"]
    else:  # four elements: vector loads once, the scalar expression per component
        lines = [f"    let v{k} = {ref};" for k, ref in enumerate(srcs)]
        lines.append(f"    var w: vec4<{STORAGE_TYPE[out_dtype.name]}>;")
        for c in range(4):
            refs = [f"v{k}[{c}]" if vec[k] or k in aliases else f"v{k}" for k in range(len(in_dtypes))]
            lines += ["    {", *element(refs, "        "), f"        w[{c}] = {result};", "    }"]
        lines.append("    out0[o.x] = w;")
    scalar = "f16" if any(d.name == "float16" for d in (out_dtype, *in_dtypes)) else "f32"
    return render("elementwise", scalar=scalar, BINDINGS="\n".join(bindings), CONFIG=str(slot),
                  HELPERS=spec.helpers, OFFSETS="offsets_nd" if nd else "offsets_1d", BODY="\n".join(lines))


VEC_TYPES = ("float32", "float16", "int32", "bool")


def _vec_plan(out: TensorArg, inputs: Sequence[TensorArg], sizes: list[int], dims: list[list[int]],
              numel: int) -> tuple[bool, ...] | None:
    """Per-input vec4 flags when every operand is contiguous (or a broadcast scalar) and 4-aligned."""
    if numel % 4 or len(sizes) != 1 or env_set(NOVEC) or dims[0][0] != 1 or out.offset % 4:
        return None
    if any(t.dtype.name not in VEC_TYPES for t in (out, *inputs)):
        return None
    flags = []
    for t, stride in zip(inputs, dims[0][1:]):
        if stride not in (0, 1) or (stride == 1 and t.offset % 4):
            return None
        flags.append(stride == 1)
    return tuple(flags)


def run_map(spec: MapSpec, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
            params: Sequence[int] = ()) -> None:
    """Dispatch one map op. The launch (program, uniform bytes, grid) is a pure function of the
    operands' layouts, so it is cached per device by them: a training loop repeats the same few
    layouts, and the cached path skips dim coalescing, planning and packing."""
    out = outputs[0]
    ob = out.buffer
    if len(outputs) == 1 and isinstance(ob, WgpuBuffer):
        dev = ob.dev
        key: list[Any] = [spec, out.shape, out.strides, out.offset, out.dtype, tuple(params), env_set(NOVEC)]
        buffers = [ob]
        for t in inputs:
            b = t.buffer
            if b is ob:  # aliasing an output: the general path decides (copy or in-place read)
                break
            buffers.append(b)
            key += (t.strides, t.offset, t.dtype)
        else:
            plans = dev.launch_plans
            try:
                hit = plans.get(tuple(key))
            except TypeError:  # unhashable shape or strides (lists): no caching
                hit = key = None
            if hit is not None:
                if hit[0] is not None:
                    dev.recorder.dispatch(hit[0], buffers, hit[1], hit[2])
                return
            launch = _map_launch(spec, outputs, inputs, params, dev)
            if key is not None:
                remember(plans, tuple(key), launch)
            return
    _map_launch(spec, outputs, inputs, params, None)


def _map_launch(spec: MapSpec, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                params: Sequence[int], cached_dev: Any) -> tuple[Any, bytes | None, tuple[int, int, int]]:
    """Record the op through the general path; returns its (program, uniform, grid), (None, ...) when
    nothing was dispatched. `cached_dev` is set when the caller checked there is no aliasing."""
    out = outputs[0]
    numel = out.numel
    if numel == 0:
        return None, None, (0, 0, 0)
    if cached_dev is None:
        dev = device_of(outputs, inputs)
        inputs, aliases = dealias(dev, outputs, inputs, allow_identical=True)
    else:
        dev, aliases = cached_dev, {}
    sizes, dims = coalesce(out.shape, [out.strides, *(t.strides for t in inputs)])
    if len(sizes) > MAX_DIMS:
        raise RumusError(f"wgpu {spec.op}: operands with more than {MAX_DIMS} non-mergeable dims "
                         f"(shape {out.shape}) are not supported")
    nd = len(sizes) > 1
    vec = _vec_plan(out, inputs, sizes, dims, numel)
    in_dtypes = tuple(t.dtype for t in inputs)
    alias_key = tuple(sorted(aliases.items()))
    prog = dev.programs.get(("map", spec.op, out.dtype.name, tuple(d.name for d in in_dtypes), alias_key, nd, vec),
                            lambda: _source(spec, out.dtype, in_dtypes, aliases, nd, vec))
    offsets = [out.offset, *(t.offset for t in inputs)]
    if vec is not None:  # count, offsets and strides in vec4 units for the vector operands
        numel //= 4
        offsets = [offsets[0] // 4, *(o // 4 if v else o for o, v in zip(offsets[1:], vec))]
        dims = [[1, *(1 if v else 0 for v in vec)]]
    x, y, z = grid((numel + WG - 1) // WG, dev.max_groups)
    words = [numel, len(sizes), x * WG, 0]
    words += [*params, *([0] * (8 - len(params)))]
    words += [*offsets, *([0] * (3 - len(inputs)))]
    words += [*sizes, *([1] * (MAX_DIMS - len(sizes)))]
    for st in dims or [[0] * (1 + len(inputs))]:
        words += [i32_word(s) for s in st] + [0] * (3 - len(inputs))
    data = struct.pack(f"<{len(words)}I", *words)
    buffers = [out.buffer, *(t.buffer for k, t in enumerate(inputs) if k not in aliases)]
    dev.recorder.dispatch(prog, buffers, data, (x, y, z))
    return prog, data, (x, y, z)


def _unary(op: str) -> Any:
    spec = MapSpec(op, UNARY[op])

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        run_map(spec, outputs, inputs)
    return kernel


def _activation(op: str) -> Any:
    spec = MapSpec(op, {"f": ACTIVATIONS[op]}, helpers=ACTIVATION_HELPERS)
    names = ACTIVATION_PARAMS.get(op.removesuffix("_backward"), ())

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        run_map(spec, outputs, inputs, [f32_bits(float(attrs[n])) for n in names])
    return kernel


def _binary(op: str, table: Mapping[str, Mapping[str, str]], result: str = "same") -> Any:
    spec = MapSpec(op, table[op], result)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        run_map(spec, outputs, inputs)
    return kernel


_WHERE = MapSpec("where", {k: "select(c, b, a)" for k in "fil"} | {"b": "select(c, b, a)"})
_CLAMP = MapSpec("clamp", CLAMP, helpers=CLAMP_HELPERS)
_COPY = MapSpec("copy", {})
_FILL = MapSpec("fill", {})


def where(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    run_map(_WHERE, outputs, inputs)


def _i64_words(v: int) -> list[int]:
    v = max(-(1 << 63), min((1 << 63) - 1, int(v)))
    return [v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF]


def clamp(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    lo, hi = attrs.get("min"), attrs.get("max")
    k = kind(inputs[0].dtype)
    if k == "f":
        params = [f32_bits(-math.inf if lo is None else float(lo)), f32_bits(math.inf if hi is None else float(hi))]
    else:
        # integers: x < ceil(lo) becomes trunc(lo), then x > floor(hi) becomes trunc(hi), as numpy's
        # float bounds followed by a truncating cast
        big = (1 << 31) - 1 if k == "i" else (1 << 63) - 1
        lo_cmp, lo_val = (-big - 1, 0) if lo is None else (math.ceil(lo), math.trunc(lo))
        hi_cmp, hi_val = (big, 0) if hi is None else (math.floor(hi), math.trunc(hi))
        vals = [max(-big - 1, min(big, v)) for v in (lo_cmp, lo_val, hi_cmp, hi_val)]
        params = [i32_word(v) for v in vals] if k == "i" else [w for v in vals for w in _i64_words(v)]
    run_map(_CLAMP, outputs, inputs, params)


def copy(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dst, src = outputs[0], inputs[0]
    kind(dst.dtype)  # a cast to a dtype this backend cannot store (int8, ...) is a DTypeError, not a KeyError
    if src.dtype == dst.dtype and _copy_as_bytes(dst, src):
        return
    run_map(_COPY, outputs, inputs)


def _copy_as_bytes(dst: TensorArg, src: TensorArg) -> bool:
    """Same-dtype contiguous copies between different buffers go through copy_buffer_to_buffer."""
    if dst.buffer is src.buffer or not (dst.is_contiguous() and src.is_contiguous()):
        return False
    item = 4 if dst.dtype.is_bool else dst.dtype.itemsize
    n, so, do = dst.numel * item, src.offset * item, dst.offset * item
    if n % 4 or so % 4 or do % 4:
        return False
    if n:
        dst.buffer.dev.recorder.copy(src.buffer, so, dst.buffer, do, n)
    return True


def fill(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out = outputs[0]
    value = attrs.get("value", 0.0)
    k = kind(out.dtype)
    if k == "f":
        params = [f32_bits(float(value))]
    elif k == "i":
        params = [i32_word(int(value))]
    elif k == "l":
        params = _i64_words(int(value))
    else:
        params = [1 if value else 0]
    run_map(_FILL, outputs, [], params)


def kernels() -> dict[str, Any]:
    table: dict[str, Any] = {op: _unary(op) for op in UNARY}
    table.update({op: _binary(op, BINARY) for op in BINARY})
    table.update({op: _binary(op, COMPARE, "compare") for op in COMPARE})
    table.update({op: _activation(op) for op in ACTIVATIONS})
    table.update({"where": where, "clamp": clamp, "copy": copy, "fill": fill})
    return table

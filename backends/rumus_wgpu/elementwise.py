"""Elementwise kernels: every op of the expression table, where, clamp, copy and fill.

One WGSL skeleton (shaders/elementwise.wgsl) serves every op: the table ops' bodies are rendered from
rumus_contracts.ops.expressions at pipeline creation (expr_wgsl.py) for the input dtype's compute kind
(f32 math for float32/float16, i32, emulated int64, bool), and their dtype claims are derived from
what the renderer expresses. Python picks
the 1-D indexing variant when every operand coalesces to a single strided dim (the contiguous and
scalar-broadcast fast path) or the general N-D variant otherwise.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, RumusError, TensorArg, parse_dtype
from rumus_contracts.ops import expr_c, expr_wgsl
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.expressions import Expr, all_kernels

from . import bf16
from .layout import (
    NOVEC, STORAGE_TYPE, WG, coalesce, convert, dealias, device_of, env_set, f32_bits, grid, i32_word, remember,
)
from .layout import kind as _kind
from .layout import load as _load
from .layout import store as _store
from .pipelines import render
from .pool import WgpuBuffer

MAX_DIMS = 8
WGSL_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "bool")
CLAMP = {
    "f": "min_f(max_f(a, bitcast<f32>(cfg.p.x)), bitcast<f32>(cfg.p.y))",  # NaN stays NaN, as in PyTorch
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
    """How one op maps its inputs: expression per compute kind, result kind rule, WGSL helpers
    (one string, or one per compute kind)."""

    def __init__(self, op: str, exprs: Mapping[str, str], result: str = "same",
                 helpers: str | Mapping[str, str] = "") -> None:
        self.op, self.exprs, self.result, self.helpers = op, exprs, result, helpers


def kind(dtype: DType) -> str:
    """The compute kind of a dtype here: bfloat16 computes in f32 (only this module's kernels take it)."""
    return "f" if bf16.is_bf16(dtype) else _kind(dtype)


def load(dtype: DType, ref: str) -> str:
    """A stored element as its compute kind; a bfloat16 `ref` is the element's 16 bits (bf16.py)."""
    return f"bf16_to_f32({ref})" if bf16.is_bf16(dtype) else _load(dtype, ref)


def store(dtype: DType, value: str) -> str:
    return f"f32_to_bf16({value})" if bf16.is_bf16(dtype) else _store(dtype, value)


def compute_kind(dtype: DType) -> str:
    """The kind a table op computes in: bool inputs are computed as 0/1 integers."""
    k = kind(dtype)
    return "i" if k == "b" else k


def table_spec(op: str, e: Expr) -> MapSpec | None:
    """The MapSpec of an expression-table op: its WGSL function rendered per compute kind it supports."""
    exprs, helpers = {}, {}
    for k in ("f", "i", "l"):
        try:
            helpers[k], exprs[k] = expr_wgsl.function(op, e, k)
        except Unsupported:
            continue
    return MapSpec(op, exprs, "compare" if e.result == "bool" else "same", helpers) if exprs else None


def spec(op: str) -> MapSpec:
    """The MapSpec of a table op every compute kind can run (for kernels composed of maps, e.g. conv's add)."""
    out = table_spec(op, all_kernels()[op])
    if out is None:
        raise RumusError(f"wgpu: the expression table has no WGSL form of {op}")
    return out


def table_claims(op: str, e: Expr) -> tuple[DType, ...]:
    """The dtypes of the op's group whose compute kind the WGSL renderer expresses (derived, not listed)."""
    spec = table_spec(op, e)
    names = [n for n in expr_c.GROUPS[e.dtypes] if n in WGSL_DTYPES]
    return tuple(parse_dtype(n) for n in names if spec is not None and compute_kind(parse_dtype(n)) in spec.exprs)


def _source(spec: MapSpec, out_dtype: DType, in_dtypes: Sequence[DType], aliases: Mapping[int, int],
            nd: bool, vec: tuple[bool, ...] | None, pair: bool = False) -> str:
    """vec: the vec4 variant (contiguous, 4 elements per invocation); per input, whether it is read as
    vec4 (stride 1) or broadcast from one element (stride 0). pair: a contiguous bfloat16 output written a
    whole word (two elements) per invocation, with no atomics (see _pair_plan)."""
    def array(dt: DType, wide: bool) -> str:
        if bf16.is_bf16(dt):  # two elements per word (never vec4: see _vec_plan)
            return "array<u32>"
        t = STORAGE_TYPE[dt.name]
        return f"array<vec4<{t}>>" if wide else f"array<{t}>"
    out_bf16 = bf16.is_bf16(out_dtype)
    out_array = "array<u32>" if pair else "array<atomic<u32>>" if out_bf16 else array(out_dtype, vec is not None)
    bindings = [f"@group(0) @binding(0) var<storage, read_write> out0: {out_array};"]
    if out_bf16:
        bindings.append(bf16.input_accessor("out0") if pair else bf16.output_accessors("out0"))
    slot = 1
    for k, dt in enumerate(in_dtypes):
        if k in aliases:
            continue
        wide = vec is not None and vec[k]
        bindings.append(f"@group(0) @binding({slot}) var<storage, read> in{k}: {array(dt, wide)};")
        if bf16.is_bf16(dt):
            bindings.append(bf16.input_accessor(f"in{k}"))
        slot += 1
    # operand kind: where's condition is bool, its values set the kind; compare bools as ints
    op_kind = kind(in_dtypes[1] if spec.op == "where" else in_dtypes[0]) if in_dtypes else kind(out_dtype)
    if op_kind == "b" and spec.exprs and "b" not in spec.exprs:  # table ops compute bools as 0/1 integers
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
    if out_bf16 and res_kind in ("i", "l"):  # integers round to bfloat16 once, not through f32
        result = "bf16_from_i32(r)" if res_kind == "i" else "bf16_from_i64(r)"
    else:
        result = store(out_dtype, convert("r", res_kind, kind(out_dtype)))

    def element(refs: Sequence[str], indent: str) -> list[str]:
        lines = []
        for k, (dt, ref) in enumerate(zip(in_dtypes, refs)):
            want = "b" if spec.op == "where" and k == 0 else op_kind
            lines.append(f"{indent}let {NAMES[k]} = {convert(load(dt, ref), kind(dt), want)};")
        return lines + [f"{indent}let r = {expr};"]

    def ref(k: int) -> str:
        name, index = ("out0", "o.x") if k in aliases else (f"in{k}", f"o[{k + 1}]")
        return f"bf_{name}({index})" if bf16.is_bf16(in_dtypes[k]) else f"{name}[{index}]"
    srcs = [ref(k) for k in range(len(in_dtypes))]
    raw = out_bf16 and spec.op == "copy" and bf16.is_bf16(in_dtypes[0])
    if raw:
        result = srcs[0]  # the 16 bits moved as they are: a NaN's payload is kept
    if pair:  # elements 2i and 2i+1 (the word o.x / 2 of the output), one plain store of the word
        lines = ["    let o0 = offsets_1d(2u * i);", "    var h0: u32;", "    var h1: u32;"]
        for half in (0, 1):
            lines += ["    {", f"        let o = offsets_1d(2u * i + {half}u);"]
            lines += [] if raw else element(srcs, "        ")
            lines += [f"        h{half} = {result};", "    }"]
        lines.append("    out0[o0.x >> 1u] = (h0 & 0xffffu) | (h1 << 16u);")
    elif raw:
        lines = [f"    bf_put_out0(o.x, {result});"]
    elif out_bf16:
        lines = element(srcs, "    ") + [f"    bf_put_out0(o.x, {result});"]
    elif vec is None:
        lines = element(srcs, "    ") + [f"    out0[o.x] = {result};"]
    else:  # four elements: vector loads once, the scalar expression per component
        lines = [f"    let v{k} = {ref};" for k, ref in enumerate(srcs)]
        lines.append(f"    var w: vec4<{STORAGE_TYPE[out_dtype.name]}>;")
        for c in range(4):
            refs = [f"v{k}[{c}]" if vec[k] or k in aliases else f"v{k}" for k in range(len(in_dtypes))]
            lines += ["    {", *element(refs, "        "), f"        w[{c}] = {result};", "    }"]
        lines.append("    out0[o.x] = w;")
    scalar = "f16" if any(d.name == "float16" for d in (out_dtype, *in_dtypes)) else "f32"
    helpers = spec.helpers if isinstance(spec.helpers, str) else spec.helpers.get(op_kind, "")
    include = ("bf16",) if any(bf16.is_bf16(d) for d in (out_dtype, *in_dtypes)) else ()
    return render("elementwise", scalar=scalar, include=include, BINDINGS="\n".join(bindings), CONFIG=str(slot),
                  HELPERS=helpers, OFFSETS="offsets_nd" if nd else "offsets_1d", BODY="\n".join(lines))


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


def _pair_plan(out: TensorArg, sizes: list[int], dims: list[list[int]], numel: int) -> bool:
    """Whether a bfloat16 output is written a whole u32 word per invocation: it is contiguous, starts on
    a word and has an even count (every word it touches is all its own); elsewhere each element is
    stored with atomics on its word."""
    return (bf16.is_bf16(out.dtype) and numel % 2 == 0 and len(sizes) == 1 and dims[0][0] == 1
            and out.offset % 2 == 0 and not env_set(NOVEC))


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
                hit = key = None  # type: ignore[assignment]  # key is checked before use
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
    pair = _pair_plan(out, sizes, dims, numel)
    in_dtypes = tuple(t.dtype for t in inputs)
    alias_key = tuple(sorted(aliases.items()))
    prog = dev.programs.get(("map", spec.op, out.dtype.name, tuple(d.name for d in in_dtypes), alias_key, nd, vec,
                             pair), lambda: _source(spec, out.dtype, in_dtypes, aliases, nd, vec, pair))
    if pair:  # one invocation per word; offsets and strides stay in elements
        numel //= 2
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


def _table_kernel(spec: MapSpec, e: Expr) -> Any:
    names = tuple(e.params)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        run_map(spec, outputs, inputs, [f32_bits(float(attrs[n])) for n in names] if names else ())
    return kernel


_WHERE = MapSpec("where", {k: "select(c, b, a)" for k in "fil"} | {"b": "select(c, b, a)"})
_CLAMP = MapSpec("clamp", CLAMP, helpers={"f": expr_wgsl.helper_source(["min_f", "max_f"]), "i": CLAMP_HELPERS,
                                          "l": CLAMP_HELPERS})
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
    if src.dtype == dst.dtype and (_copy_as_bytes(dst, src) or _copy_strided(dst, src)):
        return
    run_map(_COPY, outputs, inputs)


COPY_DIMS = 4  # layouts of up to this many coalesced dims take copy_strided.wgsl
_UNIT = {"float32": "f32", "int32": "i32", "bool": "u32", "float16": "f16"}


def _copy_strided(dst: TensorArg, src: TensorArg) -> bool:
    """A same-dtype copy between different buffers whose layouts coalesce to <= COPY_DIMS dims, through
    shaders/copy_strided.wgsl (cached per layout); False where it does not apply."""
    ob = dst.buffer
    if ob is src.buffer or dst.dtype.name not in _UNIT or not isinstance(ob, WgpuBuffer) or dst.numel == 0:
        return False
    dev = ob.dev
    key: tuple[Any, ...] | None = ("copy_strided", dst.shape, dst.strides, dst.offset, src.strides, src.offset,
                                   dst.dtype, env_set(NOVEC))
    try:
        hit = dev.launch_plans.get(key)
    except TypeError:  # unhashable shape or strides (lists): no caching
        hit, key = None, None
    if hit is None:
        hit = _copy_plan(dev, dst, src)
        if key is not None:
            remember(dev.launch_plans, key, hit)
    if hit[0] is None:
        return False
    dev.recorder.dispatch(hit[0], [ob, src.buffer], hit[1], hit[2])
    return True


def _copy_plan(dev: Any, dst: TensorArg, src: TensorArg) -> tuple[Any, bytes | None, tuple[int, int, int]]:
    sizes, dims = coalesce(dst.shape, [dst.strides, src.strides])
    if len(sizes) > COPY_DIMS or any(s < 0 for st in dims for s in st):
        return None, None, (0, 0, 0)
    sizes = [1] * (COPY_DIMS - len(sizes)) + sizes
    dims = [[0, 0]] * (COPY_DIMS - len(dims)) + dims
    # vec4 units: the innermost dim contiguous on both sides, every stride, size and offset 4-aligned
    vec = (not env_set(NOVEC) and dims[-1] == [1, 1] and sizes[-1] % 4 == 0 and dst.offset % 4 == 0
           and src.offset % 4 == 0 and all(s % 4 == 0 for st in dims[:-1] for s in st))
    unit = _UNIT[dst.dtype.name]
    per = 4 if vec else 1
    if vec:
        sizes[-1] //= 4
        dims = [[s // 4 for s in st] for st in dims[:-1]] + [[1, 1]]
    units = dst.numel // per
    x, y, _ = grid((units + WG - 1) // WG, dev.max_groups)
    prog = dev.programs.get(("copy_strided", unit, vec),
                            lambda: render("copy_strided", scalar="f16" if unit == "f16" else "f32",
                                           UNIT=f"vec4<{unit}>" if vec else unit))
    data = struct.pack("<4I4I4i4i", units, x * WG, dst.offset // per, src.offset // per, *sizes,
                       *(st[0] for st in dims), *(st[1] for st in dims))
    return prog, data, (x, y, 1)


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
    if bf16.is_bf16(out.dtype):  # rounded once from the double, as the CPU's fill (f32 first would round twice)
        params = [bf16.bits_of(float(value)) << 16]
    elif k == "f":
        params = [f32_bits(float(value))]
    elif k == "i":
        params = [i32_word(int(value))]
    elif k == "l":
        params = _i64_words(int(value))
    else:
        params = [1 if value else 0]
    run_map(_FILL, outputs, [], params)


def table_kernels() -> dict[str, tuple[Any, tuple[DType, ...]]]:
    """op -> (kernel, claimed dtypes) for every expression-table op the WGSL renderer expresses."""
    out = {}
    for op, e in all_kernels().items():
        spec, claims = table_spec(op, e), table_claims(op, e)
        if spec is not None and claims:
            out[op] = (_table_kernel(spec, e), claims)
    return out


def kernels() -> dict[str, Any]:
    table: dict[str, Any] = {op: k for op, (k, _) in table_kernels().items()}
    table.update({"where": where, "clamp": clamp, "copy": copy, "fill": fill})
    return table

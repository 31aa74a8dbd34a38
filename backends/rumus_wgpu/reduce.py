"""Row kernels: sum / prod / amax / amin over dims, argmax / argmin (softmax.py builds on them).

Every output owns a row (the reduced elements); a power-of-two group of invocations reduces one row,
so short rows pack many per workgroup and long rows get a whole workgroup. A long row with few
outputs (a full reduction) is split across workgroups: partials first, then a second pass. Strided
reductions over an outer dim with many outputs use small groups, so neighbouring invocations read
neighbouring addresses.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, RumusError, TensorArg, float32, int64

from .layout import (
    COMPUTE_TYPE, NOVEC, STORAGE_TYPE, coalesce, convert, dealias, device_of, env_set, grid, i32_word, kind, load,
    new_buffer, remember, store,
)
from .pipelines import render
from .pool import WgpuBuffer

MAX_DIMS = 8
NINF = 0xFF800000
SPLIT_CHUNK = 4096
NO_SUBGROUPS = "RUMUS_WGPU_NO_SUBGROUPS"  # set: row merges through workgroup memory even with subgroups
ACC_KIND = {  # op -> compute kind of the input -> accumulator kind
    "sum": {"f": "f", "i": "l", "l": "l"}, "prod": {"f": "f", "i": "l", "l": "l"},
    "amax": {"f": "f", "i": "i", "l": "l"}, "amin": {"f": "f", "i": "i", "l": "l"},
}
IDENTITY = {
    "sum": {"f": "0.0", "l": "vec2<u32>(0u)"},
    "prod": {"f": "1.0", "l": "vec2<u32>(1u, 0u)"},
    "amax": {"f": "bitcast<f32>(cfg.ninf)", "i": "bitcast<i32>(0x80000000u)", "l": "vec2<u32>(0u, 0x80000000u)"},
    "amin": {"f": "bitcast<f32>(cfg.ninf ^ 0x80000000u)", "i": "bitcast<i32>(0x7fffffffu)",
             "l": "vec2<u32>(0xffffffffu, 0x7fffffffu)"},
}
# WGSL leaves max/min of a NaN indeterminate (NVIDIA and lavapipe return the number): a NaN operand is
# picked from its bits, so amax/amin propagate NaN as numpy, torch and the CPU kernels do. U is the
# accumulator's u32 type (u32, or vec4<u32> in the column kernel), for a componentwise test.
_NAN = "((bitcast<U>({x}) & U(0x7fffffffu)) > U(0x7f800000u))"
_PICK_NAN = f"select(select({{op}}(a, b), b, {_NAN.format(x='b')}), a, {_NAN.format(x='a')})"
COMBINE = {
    "sum": {"f": "a + b", "l": "i64_add(a, b)"},
    "prod": {"f": "a * b", "l": "i64_mul(a, b)"},
    "amax": {"f": _PICK_NAN.format(op="max"), "i": "max(a, b)", "l": "i64_max(a, b)"},
    "amin": {"f": _PICK_NAN.format(op="min"), "i": "min(a, b)", "l": "i64_min(a, b)"},
}


def combine(op: str, acc_kind: str, acc_type: str) -> str:
    """COMBINE's expression for an accumulator of `acc_type` (f32, vec4<f32>, ...)."""
    return COMBINE[op][acc_kind].replace("U", "vec4<u32>" if acc_type.startswith("vec4") else "u32")
# a strictly better than b; NaN is better than any number for both ops (numpy's and the CPU kernels' rule)
BETTER = {"argmax": {"f": "a > b || (is_nan(a) && !is_nan(b))", "i": "a > b", "l": "i64_lt(b, a)"},
          "argmin": {"f": "a < b || (is_nan(a) && !is_nan(b))", "i": "a < b", "l": "i64_lt(a, b)"}}
ZERO = {"f": "0.0", "i": "0", "l": "vec2<u32>(0u)"}


def pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def pow2_floor(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


def _pad(values: Sequence[int], n: int, fill: int = 0) -> list[int]:
    if len(values) > n:
        raise RumusError(f"wgpu reductions support at most {n} non-mergeable dims, got {len(values)}")
    return [*values, *([fill] * (n - len(values)))]


class Rows:
    """The row decomposition of one reduction: kept dims (rows) and reduced dims (row elements)."""

    def __init__(self, x: TensorArg, out: TensorArg, dims: Sequence[int]) -> None:
        kept = [d for d in range(len(x.shape)) if d not in dims]
        self.ksizes, kst = coalesce([x.shape[d] for d in kept], [[x.strides[d] for d in kept],
                                                                  [out.strides[d] for d in kept]])
        self.kin, self.kout = [s[0] for s in kst], [s[1] for s in kst]
        self.rsizes, rst = coalesce([x.shape[d] for d in dims], [[x.strides[d] for d in dims]])
        self.rstr = [s[0] for s in rst]
        self.rows = out.numel
        self.rlen = 1
        for d in dims:
            self.rlen *= x.shape[d]
        self.in_offset, self.out_offset = x.offset, out.offset
        self.out_rstride = 0
        self.in1_delta = 0  # softmax backward: element offset of y's rows from grad's

    def group(self, per_invocation: int = 1) -> int:
        """Invocations per row; `per_invocation` elements per load (4 on the vec4 path)."""
        n = (self.rlen + per_invocation - 1) // per_invocation
        if n <= 1:
            return 1
        t = min(256, pow2_ceil(n))
        if self.rstr and self.rstr[-1] != 1 and self.rows >= 2048:
            # an outer-dim reduction: neighbouring rows are neighbouring addresses, keep groups small
            t = max(1, min(t, pow2_floor(65536 // self.rows)))
        return t

    def pack(self, t: int, grid_x: int, chunk: int, splits: int, params: Sequence[float] = (),
             col_offsets: Sequence[int] = ()) -> bytes:
        """shaders/rows.wgsl's Config; params (at most two) and col_offsets (at most four): a row op's."""
        p = struct.unpack("<2I", struct.pack("<2f", *params, *([0.0] * (2 - len(params)))))
        words = [self.rows, self.rlen, t, grid_x, chunk, len(self.ksizes), len(self.rsizes), splits,
                 self.in_offset, self.out_offset, NINF, i32_word(self.out_rstride), i32_word(self.in1_delta), *p, 0]
        words += _pad(self.ksizes, MAX_DIMS, 1) + [i32_word(s) for s in _pad(self.kin, MAX_DIMS)]
        words += [i32_word(s) for s in _pad(self.kout, MAX_DIMS)]
        words += _pad(self.rsizes, MAX_DIMS, 1) + [i32_word(s) for s in _pad(self.rstr or [0], MAX_DIMS)]
        words += _pad(list(col_offsets), 4)
        return struct.pack(f"<{len(words)}I", *words)


def _bindings(out_type: str, in_type: str) -> str:
    return (f"@group(0) @binding(0) var<storage, read_write> out0: array<{out_type}>;\n"
            f"@group(0) @binding(1) var<storage, read> in0: array<{in_type}>;")


def _reduce_source(op: str, in_dtype: DType, out_dtype: DType | None, in_is_acc: bool, vec: bool) -> str:
    """out_dtype None: write partials (accumulator type) for a second pass over them. vec: rows are
    contiguous and 4-aligned, read as vec4 (four loads in flight per invocation)."""
    acc = kind(in_dtype) if in_is_acc else ACC_KIND[op][kind(in_dtype)]
    acc_type = COMPUTE_TYPE[acc]

    def value(ref: str) -> str:
        return convert(load(in_dtype, ref), kind(in_dtype), acc)
    if vec:
        v = [value(f"v[{c}]") for c in range(4)]
        loop = ("        for (var r = begin + lane * 4u; r < end; r += t * 4u) {\n"
                "            let v = in0[(u32(base.x) + r) / 4u];\n"
                f"            acc = combine(acc, combine(combine({v[0]}, {v[1]}), combine({v[2]}, {v[3]})));\n"
                "        }")
    else:
        loop = ("        for (var r = begin + lane; r < end; r += t) {\n"
                f"            acc = combine(acc, {value('in0[u32(base.x + elem_offset(r))]')});\n"
                "        }")
    if out_dtype is None:
        out_type, write = acc_type, "out0[o * cfg.splits + wid.z] = acc;"
    else:
        out_type = STORAGE_TYPE[out_dtype.name]
        write = f"out0[u32(base.y)] = {store(out_dtype, convert('acc', acc, kind(out_dtype)))};"
    in_type = STORAGE_TYPE[in_dtype.name]
    return render("reduce", include=("rows",), BINDINGS=_bindings(out_type, f"vec4<{in_type}>" if vec else in_type),
                  HELPERS="", ACC=acc_type, IDENTITY=IDENTITY[op][acc], COMBINE=combine(op, acc, acc_type), LOOP=loop,
                  STORE=write, CONFIG="2")


def _acc_dtype(op: str, in_dtype: DType) -> DType:
    k = ACC_KIND[op][kind(in_dtype)]
    return {"f": float32, "l": int64}.get(k, in_dtype)


def vec_rows(rows: Rows, dtype: DType) -> bool:
    return (not env_set(NOVEC) and dtype.name != "int64" and rows.rlen % 4 == 0
            and rows.rstr == [1] and rows.in_offset % 4 == 0 and all(s % 4 == 0 for s in rows.kin))


def cached(name: str, launch: Callable[..., Any], key_extra: Callable[[], Any] | None = None) -> Any:
    """A row kernel over [out, x] whose single-dispatch launches are cached per device by the operands'
    layouts and attrs: `launch(dev, out, x, attrs)` (x no longer aliasing out, out not empty) records
    the op and returns (program, uniform, grid) when it was one dispatch over [out, x], a replay(out
    buffer, x buffer) callable for a launch of several dispatches, or None (not cached). key_extra():
    whatever else the launch depends on (softmax: its row plan's switches)."""
    def run(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> Any:
        dev = device_of(outputs, inputs)
        (x,), _ = dealias(dev, outputs, [inputs[0]])
        return launch(dev, outputs[0], x, attrs)

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        out, x = outputs[0], inputs[0]
        if out.numel == 0:
            return
        ob = out.buffer
        if len(outputs) != 1 or x.buffer is ob or not isinstance(ob, WgpuBuffer):
            run(outputs, inputs, attrs)
            return
        try:
            key: Any = (name, out.shape, out.strides, out.offset, out.dtype, x.shape, x.strides, x.offset, x.dtype,
                        tuple(attrs.get("dims", ())), attrs.get("dim"), env_set(NOVEC), env_set(NO_SUBGROUPS),
                        key_extra() if key_extra is not None else None)
            hit = ob.dev.launch_plans.get(key)
        except TypeError:  # unhashable shape, strides or attrs: no caching
            hit, key = None, None
        if hit is not None:
            if callable(hit):  # a launch of several dispatches (column_kernel): replay it
                hit(ob, x.buffer)
            elif hit[0] is not None:
                ob.dev.recorder.dispatch(hit[0], [ob, x.buffer], hit[1], hit[2])
            return
        plan = run(outputs, inputs, attrs)
        if key is not None and plan is not None:
            remember(ob.dev.launch_plans, key, plan)
    return kernel


COLUMN_THREADS = 1 << 17  # a column reduction splits its rows until about this many invocations run
COLUMN_MIN_ROWS = 8  # ... with at least this many rows per split
FOLD_UNITS = 16  # column units per workgroup of the split fold (shaders/reduce_columns.wgsl)
COLUMN_MIN_ELEMENTS = 1 << 15  # below, the one-dispatch row kernel costs the host less and moves little


def leading_dim(rows: Rows, dtype: DType) -> bool:
    """A float reduction over one (coalesced) outer dim whose kept columns are contiguous on both sides:
    the column kernel's case (bias gradients)."""
    return (kind(dtype) == "f" and len(rows.rsizes) == 1 and rows.kin == [1] and rows.kout == [1]
            and rows.rstr[0] >= rows.rows)


def _column_source(op: str, dtype: DType, vec: bool) -> str:
    t = STORAGE_TYPE[dtype.name]
    io = f"vec4<{t}>" if vec else t
    acc = "vec4<f32>" if vec else "f32"
    bindings = (f"@group(0) @binding(0) var<storage, read_write> out0: array<{io}>;\n"
                f"@group(0) @binding(1) var<storage, read> in0: array<{io}>;\n"
                f"@group(0) @binding(2) var<storage, read_write> parts: array<{acc}>;")
    return render("reduce_columns", BINDINGS=bindings, ACC=acc, IDENTITY=f"{acc}({IDENTITY[op]['f']})",
                  COMBINE=combine(op, "f", acc), LOAD=f"{acc}(v)", STORE=f"{io}(acc)", CONFIG="3")


def column_kernel(dev: Any, op: str, out: TensorArg, x: TensorArg, rows: Rows) -> Callable[[Any, Any], None]:
    """Reduce the leading dim of [rlen, rows.rows] (row stride rows.rstr[0]) in two passes: splits of the
    rows folded per column unit, then each unit's splits folded in order (deterministic). Returns the
    launch as replay(out_buffer, x_buffer), which `cached` keeps per layout."""
    if out.dtype != x.dtype:
        raise RumusError(f"wgpu {op}: the column kernel writes its input's type ({x.dtype}), not {out.dtype}")
    cols, length, stride = rows.rows, rows.rlen, rows.rstr[0]
    vec = (not env_set(NOVEC) and cols % 4 == 0 and stride % 4 == 0 and x.offset % 4 == 0 and out.offset % 4 == 0)
    per = 4 if vec else 1
    units = cols // per
    splits = max(1, min(COLUMN_THREADS // units, length // COLUMN_MIN_ROWS, dev.max_groups))
    chunk = (length + splits - 1) // splits
    splits = (length + chunk - 1) // chunk
    gx = (units + 255) // 256
    fold_groups = (units + FOLD_UNITS - 1) // FOLD_UNITS
    if fold_groups > dev.max_groups:
        raise RumusError(f"wgpu {op}: {cols} columns exceed this device's dispatch limit")
    key = ("reduce_columns", op, x.dtype.name, vec)
    data = struct.pack("<8I", units, length, chunk, splits, x.offset // per, out.offset // per, stride // per, NINF)
    passes = [(dev.programs.get((*key, entry), lambda: _column_source(op, x.dtype, vec), entry_point=entry), groups)
              for entry, groups in (("partial", (gx, splits, 1)), ("fold_splits", (fold_groups, 1, 1)))]

    def replay(out_buffer: Any, x_buffer: Any) -> None:
        buffers = [out_buffer, x_buffer, new_buffer(dev, units * splits * 4 * per, "column partials")]
        for prog, groups in passes:
            dev.recorder.dispatch(prog, buffers, data, groups)
    replay(out.buffer, x.buffer)
    return replay


def reduce_kernel(op: str) -> Any:
    def kernel(dev: Any, out: TensorArg, x: TensorArg, attrs: Mapping[str, Any]) -> Any:
        rows = Rows(x, out, tuple(attrs.get("dims", ())))
        # the column kernel reads and writes one storage type: a reduction that also converts (split-K's
        # float32 partials into a float16 C) takes the row kernel, which converts on its store; so do
        # wider ones (the fold's grid is 1-D)
        if (out.dtype == x.dtype and leading_dim(rows, x.dtype) and rows.rows > 1 and rows.rlen > 1
                and x.numel >= COLUMN_MIN_ELEMENTS and rows.rows <= FOLD_UNITS * dev.max_groups):
            return column_kernel(dev, op, out, x, rows)
        vec = vec_rows(rows, x.dtype)
        t = rows.group(4 if vec else 1)
        per_wg = 256 // t
        groups = (rows.rows + per_wg - 1) // per_wg
        splits = 1
        if t == 256 and groups < 128 and rows.rlen > 2 * SPLIT_CHUNK:
            splits = min((rows.rlen + SPLIT_CHUNK - 1) // SPLIT_CHUNK, max(1, 1024 // groups), dev.max_groups)
        chunk = (rows.rlen + splits - 1) // splits
        if vec:
            chunk = (chunk + 3) // 4 * 4
        gx, gy, _ = grid(groups, dev.max_groups)
        if splits == 1:
            prog = dev.programs.get(("reduce", op, x.dtype.name, out.dtype.name, vec),
                                    lambda: _reduce_source(op, x.dtype, out.dtype, False, vec))
            data = rows.pack(t, gx, chunk, 0)
            dev.recorder.dispatch(prog, [out.buffer, x.buffer], data, (gx, gy, 1))
            return prog, data, (gx, gy, 1)
        acc = _acc_dtype(op, x.dtype)
        part = new_buffer(dev, rows.rows * splits * acc.itemsize, "reduction partials")
        prog = dev.programs.get(("reduce", op, x.dtype.name, None, vec),
                                lambda: _reduce_source(op, x.dtype, None, False, vec))
        dev.recorder.dispatch(prog, [part, x.buffer], rows.pack(t, gx, chunk, splits), (gx, gy, splits))
        # second pass: rows of `splits` contiguous partials
        rows2 = copy.copy(rows)
        rows2.kin, stride = [], splits
        for s in reversed(rows.ksizes):
            rows2.kin.insert(0, stride)
            stride *= s
        rows2.rsizes, rows2.rstr, rows2.rlen, rows2.in_offset = [splits], [1], splits, 0
        t2 = min(256, pow2_ceil(splits))
        per_wg2 = 256 // t2
        gx2, gy2, _ = grid((rows.rows + per_wg2 - 1) // per_wg2, dev.max_groups)
        prog2 = dev.programs.get(("reduce2", op, acc.name, out.dtype.name),
                                 lambda: _reduce_source(op, acc, out.dtype, True, False))
        dev.recorder.dispatch(prog2, [out.buffer, part], rows2.pack(t2, gx2, splits, 0), (gx2, gy2, 1))
        return None
    return cached("reduce:" + op, kernel)


# argmax / argmin's accumulator: the best value so far and its index in the row (NONE: no element yet)
_ARG_HELPERS = """
struct Best {
    v: VAL,
    i: u32,
}

// from the bits: a compiler may fold v != v to false
fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

fn better(a: VAL, b: VAL) -> bool {
    return BETTER;
}

// b's element replaces a's where a has none, or b's is better, or as good and earlier (first index on ties)
fn pick(a: Best, b: Best) -> Best {
    if (b.i != NONE && (a.i == NONE || better(b.v, a.v) || (!better(a.v, b.v) && b.i < a.i))) {
        return b;
    }
    return a;
}
"""
# the walk over the row in index order: a later element only wins if strictly better
_ARG_LOOP = """        for (var r = begin + lane; r < end; r += t) {
            let x = LOAD;
            if (better(x, acc.v) || acc.i == NONE) {
                acc = Best(x, r);
            }
        }"""


def _arg_source(op: str, dtype: DType) -> str:
    """argmax / argmin over a row (reduce.wgsl with a (value, index) accumulator); the int64 result is
    written as (index, 0)."""
    k = kind(dtype)
    helpers = _ARG_HELPERS.replace("VAL", COMPUTE_TYPE[k]).replace("BETTER", BETTER[op][k])
    loop = _ARG_LOOP.replace("LOAD", load(dtype, "in0[u32(base.x + elem_offset(r))]"))
    return render("reduce", include=("rows",), BINDINGS=_bindings("vec2<u32>", STORAGE_TYPE[dtype.name]),
                  HELPERS=helpers.replace("NONE", "0xffffffffu"), ACC="Best", IDENTITY=f"Best({ZERO[k]}, 0xffffffffu)",
                  COMBINE="pick(a, b)", LOOP=loop.replace("NONE", "0xffffffffu"),
                  STORE="out0[u32(base.y)] = vec2<u32>(acc.i, 0u);", CONFIG="2")


def arg_kernel(op: str) -> Any:
    def kernel(dev: Any, out: TensorArg, x: TensorArg, attrs: Mapping[str, Any]) -> Any:
        dims = (int(attrs.get("dim", 0)),) if x.shape else ()
        rows = Rows(x, out, dims)
        t = rows.group()
        per_wg = 256 // t
        gx, gy, _ = grid((rows.rows + per_wg - 1) // per_wg, dev.max_groups)
        prog = dev.programs.get(("argreduce", op, x.dtype.name), lambda: _arg_source(op, x.dtype))
        data = rows.pack(t, gx, rows.rlen, 0)
        dev.recorder.dispatch(prog, [out.buffer, x.buffer], data, (gx, gy, 1))
        return prog, data, (gx, gy, 1)
    return cached("arg:" + op, kernel)


def kernels() -> dict[str, Any]:
    from . import softmax  # it builds on this module's row machinery
    table: dict[str, Any] = {op: reduce_kernel(op) for op in ACC_KIND}
    table.update({op: arg_kernel(op) for op in BETTER})
    table.update(softmax.kernels())
    return table

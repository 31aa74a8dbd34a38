"""argsort on WebGPU (shaders/sort.wgsl): a stable rank sort, one invocation per element, int64 indices out.
NaN sorts as the largest value, as on the CPU and in PyTorch."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, RumusError, TensorArg

from .layout import STORAGE_TYPE, WG, dealias, device_of, grid, i32_word, kind, load
from .pipelines import render

MAX_DIMS = 8
_NAN_A = "((bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u)"
_NAN_B = "((bitcast<u32>(b) & 0x7fffffffu) > 0x7f800000u)"
# per compute kind: the compare type, a < b with NaN largest, and equality (NaN equals NaN)
COMPARE = {
    # NaN by its bits: compilers may fold x != x away under fast-math rules
    "f": ("f32", f"({_NAN_B} && !{_NAN_A}) || a < b", f"a == b || ({_NAN_A} && {_NAN_B})"),
    "i": ("i32", "a < b", "a == b"),
    "l": ("vec2<u32>", "i64_lt(a, b)", "all(a == b)"),
}


def _source(dtype: DType) -> str:
    val, less, same = COMPARE[kind(dtype)]
    bindings = ("@group(0) @binding(0) var<storage, read_write> out0: array<vec2<u32>>;\n"
                f"@group(0) @binding(1) var<storage, read> x: array<{STORAGE_TYPE[dtype.name]}>;\n"
                "@group(0) @binding(2) var<uniform> cfg: Config;")
    return render("sort", include=("strided_grid", "dim_split"), BINDINGS=bindings, VAL=val,
                  LOAD=load(dtype, "x[u32(k)]"), LESS=less, SAME=same)


def argsort(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, x = outputs[0], inputs[0]
    if out.numel == 0:
        return
    shape, out_strides, x_strides = list(x.shape), list(out.strides), list(x.strides)
    dim = int(attrs["dim"])
    if not shape:  # 0-d: a one-element row
        shape, out_strides, x_strides, dim = [1], [1], [1], 0
    if len(shape) > MAX_DIMS:
        raise RumusError(f"wgpu argsort: at most {MAX_DIMS} dims, got {len(shape)}")
    dev = device_of([out], [x])
    (x,), _ = dealias(dev, [out], [x])
    prog = dev.programs.get(("argsort", x.dtype.name), lambda: _source(x.dtype))
    gx, gy, _ = grid((out.numel + WG - 1) // WG, dev.max_groups)
    pad = MAX_DIMS - len(shape)
    words = [out.numel, len(shape), gx * WG, dim, shape[dim], int(bool(attrs["descending"])), out.offset, x.offset]
    words += [*shape, *([1] * pad)]
    for d in range(MAX_DIMS):
        words += [i32_word(out_strides[d]), i32_word(x_strides[d]), 0, 0] if d < len(shape) else [0, 0, 0, 0]
    dev.recorder.dispatch(prog, [out.buffer, x.buffer], struct.pack(f"<{len(words)}I", *words), (gx, gy, 1))


def kernels() -> dict[str, Any]:
    return {"argsort": argsort}

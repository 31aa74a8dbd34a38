"""Fused cross-entropy forward / backward on the GPU (shaders/cross_entropy*.wgsl): one row pass each.

float32 and float16, math in f32. A group of invocations per row sized for about four loads each (a
power of two up to 256: short rows pack many per workgroup, long rows get a whole one), vec4 loads and
stores when the class count and the row starts are multiples of 4. Targets are int64 or int32; one
outside 0..C-1 that is not ignore_index sets this op's bit of the device's index error flag
(indexing.py), raised as IndexOutOfRange at the next host read, so the op never waits for the GPU. The
group merges through workgroup memory in a fixed tree: results are the same on every run.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from .indexing import OP_BITS, _error_flag
from .layout import dealias, device_of, f32_bits, grid
from .pipelines import render, wgsl_scalar
from .row_plan import group_for

_TARGET = {"int64": ("vec2<u32>", "return tgt[cfg.t_off + r];"),
           "int32": ("i32", "let v = tgt[cfg.t_off + r];\n"
                            "    return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));")}
_ACCESS_VEC = """fn x_at(e: u32) -> f32 { return f32(x[e / 4u][e % 4u]); }
fn x_vec(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }"""
_ACCESS_SCALAR = """fn x_at(e: u32) -> f32 { return f32(x[e]); }
fn x_vec(i: u32) -> vec4<f32> {
    return vec4<f32>(x_at(4u * i), x_at(4u * i + 1u), x_at(4u * i + 2u), x_at(4u * i + 3u));
}"""
# the backward's stores (both forms type-check whichever of VEC's branches runs)
_STORE_VEC = """fn dx_at(e: u32, v: f32) { dx[e / 4u][e % 4u] = scalar(v); }
fn dx_vec(i: u32, v: vec4<f32>) { dx[i] = vec4<scalar>(v); }"""
_STORE_SCALAR = """fn dx_at(e: u32, v: f32) { dx[e] = scalar(v); }
fn dx_vec(i: u32, v: vec4<f32>) {
    dx_at(4u * i, v.x); dx_at(4u * i + 1u, v.y); dx_at(4u * i + 2u, v.z); dx_at(4u * i + 3u, v.w);
}"""


def _source(entry: str, scalar: str, vec: bool, smooth: bool, weighted: bool, target: str) -> str:
    ttype, read = _TARGET[target]
    flag = {True: "true", False: "false"}
    return render(f"cross_entropy_{entry}", scalar=scalar, include=("cross_entropy",), VEC=flag[vec],
                  SMOOTH=flag[smooth], WEIGHTED=flag[weighted], IO="vec4<scalar>" if vec else "scalar",
                  TARGET=ttype, READ_TARGET=read,
                  ACCESS=_ACCESS_VEC if vec else _ACCESS_SCALAR, STORE_ACCESS=_STORE_VEC if vec else _STORE_SCALAR)


def _launch(entry: str, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    dev = device_of(outputs, inputs)
    ins, _ = dealias(dev, outputs, list(inputs))
    if entry == "fwd":
        (x, t, w), (first, lse), g = ins, outputs, None
    else:
        g, x, t, w, lse = ins
        first = outputs[0]
    rows, classes = x.shape
    if rows == 0:
        return
    smooth = float(attrs["label_smoothing"])
    weighted = bool(w.shape)
    vec = classes % 4 == 0 and x.offset % 4 == 0 and (entry == "fwd" or first.offset % 4 == 0)
    ignore = int(attrs["ignore_index"]) & 0xFFFFFFFFFFFFFFFF
    key = ("cross_entropy", entry, x.dtype.name, vec, smooth > 0.0, weighted, t.dtype.name)
    t_size = group_for(rows, classes, 4 if vec else 1, False)  # softmax's group (row_plan.py)
    gx, gy, _ = grid((rows + 256 // t_size - 1) // (256 // t_size), dev.max_groups)
    prog = dev.programs.get(key, lambda: _source(entry, wgsl_scalar(x.dtype), vec, smooth > 0.0, weighted,
                                                           t.dtype.name))
    data = struct.pack("<12If3I", rows, classes, t_size, gx, x.offset, t.offset, w.offset, first.offset, lse.offset,
                       g.offset if g is not None else 0, ignore & 0xFFFFFFFF, ignore >> 32, smooth,
                       f32_bits(float("-inf")), OP_BITS["cross_entropy"], 0)
    second = lse if entry == "fwd" else g
    assert second is not None  # the backward always has its incoming gradient
    buffers = [first.buffer, second.buffer, x.buffer, t.buffer, w.buffer, _error_flag(dev)]
    if entry == "bwd":
        buffers.append(lse.buffer)
    dev.recorder.dispatch(prog, buffers, data, (gx, gy, 1))


def cross_entropy_fwd(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("fwd", outputs, inputs, attrs)


def cross_entropy_bwd(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _launch("bwd", outputs, inputs, attrs)


def kernels() -> dict[str, Any]:
    return {"cross_entropy_fwd": cross_entropy_fwd, "cross_entropy_bwd": cross_entropy_bwd}

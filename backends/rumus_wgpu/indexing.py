"""Integer-indexed kernels: gather, index_select, embedding (gather mode) and scatter_add, index_add,
embedding_backward (scatter mode), on int32 or int64 indices.

No atomics: a scatter output element walks the index entries that can land on it (the `count`
entries along dim), so results are deterministic and the accumulating ops cost
O(outputs x entries along dim): cheap for cross-entropy's gather backward, heavy for large
embedding tables.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, DTypeError, RumusError, TensorArg, contiguous_strides

from .layout import STORAGE_TYPE, WG, dealias, device_of, f32_bits, grid, i32_word, load, store
from .pipelines import render

MAX_DIMS = 8
READ_INDEX = {
    "int32": "return idx[k];",
    # int64: the low word when it fits in i32, else out of range in the right direction
    "int64": "let v = idx[k]; if (v.y == select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) "
             "{ return bitcast<i32>(v.x); } return select(2147483646, -1, bitcast<i32>(v.y) < 0);",
}


def _source(mode: str, dtype: DType, index: DType, has_x: bool) -> str:
    if index.name not in READ_INDEX:
        raise DTypeError(f"indices must be int64 or int32, got {index}")
    t = STORAGE_TYPE[dtype.name]
    lines = [f"@group(0) @binding(0) var<storage, read_write> out0: array<{t}>;"]
    slot = 1
    if has_x:
        lines.append(f"@group(0) @binding({slot}) var<storage, read> x: array<{t}>;")
        slot += 1
    lines.append(f"@group(0) @binding({slot}) var<storage, read> idx: array<{STORAGE_TYPE[index.name]}>;")
    slot += 1
    if mode == "gather":
        at_dim = "off.z += i32(c) * cfg.strides[k].z;"
        body = ("    let j = clamp(index_at(u32(off.z)), 0, i32(cfg.dim_size) - 1);\n"
                "    out0[u32(off.x)] = x[u32(off.y + j * cfg.strides[cfg.dim].y)];")
    else:
        lines.append(f"@group(0) @binding({slot}) var<storage, read> src: array<{t}>;")
        slot += 1
        at_dim = "off.y += i32(c) * cfg.strides[k].y;"
        base = load(dtype, "x[u32(off.y)]") if has_x else "0.0"
        body = (f"    var total = 0.0;\n"
                f"    if (inside && i32(q) != cfg.padding) {{\n"
                f"        let s = cfg.strides[cfg.dim];\n"
                f"        for (var e = 0u; e < cfg.count; e++) {{\n"
                f"            if (index_at(u32(off.z + i32(e) * s.z)) == i32(q)) {{\n"
                f"                total += {load(dtype, 'src[u32(off.w + i32(e) * s.w)]')};\n"
                f"            }}\n"
                f"        }}\n"
                f"    }}\n"
                f"    var r = {base} + cfg.alpha * total;\n"
                f"    if (i32(q) == cfg.padding) {{ r = 0.0; }}\n"
                f"    out0[u32(off.x)] = {store(dtype, 'r')};")
    return render("index", BINDINGS="\n".join(lines), CONFIG=str(slot), READ_INDEX=READ_INDEX[index.name],
                  AT_DIM=at_dim, BODY=body)


def _run(mode: str, out: TensorArg, x: TensorArg | None, index: TensorArg, src: TensorArg | None, dim: int,
         dim_size: int, index_strides: Sequence[int], ishape: Sequence[int] = (), count: int = 0,
         alpha: float = 1.0, padding: int | None = None) -> None:
    numel = out.numel
    if numel == 0:
        return
    ndim = len(out.shape)
    if ndim > MAX_DIMS:
        raise RumusError(f"wgpu {mode}: at most {MAX_DIMS} dims, got {ndim}")
    dev = device_of([out], [index])
    ins = [t for t in (x, index, src) if t is not None]
    ins, _ = dealias(dev, [out], ins)
    it = iter(ins)
    x = next(it) if x is not None else None
    index = next(it)
    src = next(it) if src is not None else None
    prog = dev.programs.get(("index", mode, out.dtype.name, index.dtype.name, x is not None),
                            lambda: _source(mode, out.dtype, index.dtype, x is not None))
    gx, gy, _ = grid((numel + WG - 1) // WG, dev.max_groups)
    zeros = [0] * ndim
    cols = [out.strides, x.strides if x is not None else zeros, index_strides, src.strides if src else zeros]
    words = [numel, ndim, gx * WG, dim, dim_size, count, i32_word(-1 if padding is None else padding),
             f32_bits(alpha)]
    words += [out.offset, x.offset if x is not None else 0, index.offset, src.offset if src else 0]
    words += [*out.shape, *([1] * (MAX_DIMS - ndim))]
    words += [*(ishape or out.shape), *([1] * (MAX_DIMS - ndim))]
    for d in range(MAX_DIMS):
        words += [i32_word(c[d]) if d < ndim else 0 for c in cols]
    buffers = [out.buffer, *(t.buffer for t in (x, index, src) if t is not None)]
    dev.recorder.dispatch(prog, buffers, struct.pack(f"<{len(words)}I", *words), (gx, gy, 1))


def gather(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index) = outputs[0], inputs
    if not x.shape:  # 0-d: a copy
        x, index = _as_1d(x), _as_1d(index)
        out = _as_1d(out)
    dim = int(attrs.get("dim", 0))
    _run("gather", out, x, index, None, dim, x.shape[dim], index.strides)


def index_select(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index) = outputs[0], inputs
    dim = int(attrs.get("dim", 0))
    stride = index.strides[0] if index.shape else 0
    _run("gather", out, x, index, None, dim, x.shape[dim], [stride if d == dim else 0 for d in range(len(x.shape))])


def embedding(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (weight, indices) = outputs[0], inputs
    n = indices.numel
    flat = TensorArg(indices.buffer, (n,), (1,), indices.offset, indices.dtype)
    rows = TensorArg(out.buffer, (n, weight.shape[1]), (weight.shape[1], 1), out.offset, out.dtype)
    index_select([rows], [weight, flat], {"dim": 0})


def scatter_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index, src) = outputs[0], inputs
    if not x.shape:
        out, x, index, src = (_as_1d(t) for t in (out, x, index, src))
    dim = int(attrs.get("dim", 0))
    _run("scatter", out, x, index, src, dim, x.shape[dim], index.strides, ishape=index.shape,
         count=index.shape[dim])


def index_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index, source) = outputs[0], inputs
    dim = int(attrs.get("dim", 0))
    n = index.shape[0] if index.shape else 1
    stride = index.strides[0] if index.shape else 0
    strides = [stride if d == dim else 0 for d in range(len(x.shape))]
    ishape = [n if d == dim else s for d, s in enumerate(x.shape)]
    _run("scatter", out, x, index, source, dim, x.shape[dim], strides, ishape=ishape, count=n,
         alpha=float(attrs.get("alpha", 1.0)))


def embedding_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (grad, indices) = outputs[0], inputs
    n, d = indices.numel, out.shape[1]
    flat = TensorArg(indices.buffer, (n,), (1,), indices.offset, indices.dtype)
    rows = TensorArg(grad.buffer, (n, d), (d, 1), grad.offset, grad.dtype)
    pad = attrs.get("padding_idx")
    _run("scatter", out, None, flat, rows, 0, out.shape[0], [1, 0], ishape=[n, d], count=n,
         padding=None if pad is None else int(pad))


def _as_1d(t: TensorArg) -> TensorArg:
    return TensorArg(t.buffer, (1,), contiguous_strides((1,)), t.offset, t.dtype)


def kernels() -> dict[str, Any]:
    return {"gather": gather, "index_select": index_select, "embedding": embedding, "scatter_add": scatter_add,
            "index_add": index_add, "embedding_backward": embedding_backward}

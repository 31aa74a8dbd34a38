"""Integer-indexed kernels: gather, index_select, embedding (gather mode) and scatter_add, index_add,
embedding_backward (scatter mode), on int32 or int64 indices.

Scatter has two strategies. The deterministic walk (each output element sums the `count` index
entries that can land on it, no atomics, bit-reproducible) costs O(outputs x count): ideal for few
entries per output (cross-entropy's gather backward: one), quadratic for an embedding table. With
more than ATOMIC_MIN_COUNT entries along dim, float32 outputs are instead filled with x (or zeros) and
each index entry adds into its output by a compare-and-swap float add: O(entries), but the summation
order, and so the last bits, vary between runs. Default: the atomic path where it applies;
RUMUS_WGPU_DETERMINISTIC=1 forces the deterministic walk everywhere.

Indices out of range (CPU raises IndexOutOfRange) never touch memory outside a buffer: the kernel
ORs its op's bit into a per-device error flag that the recorder copies out with the next host read
(no extra sync) and raises as IndexOutOfRange naming the op.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, DTypeError, IndexOutOfRange, RumusError, TensorArg, contiguous_strides

from .layout import STORAGE_TYPE, WG, dealias, device_of, env_set, f32_bits, grid, i32_word, load, new_buffer, store
from .pipelines import render
from .pool import WgpuBuffer

MAX_DIMS = 8
DETERMINISTIC = "RUMUS_WGPU_DETERMINISTIC"
ATOMIC_MIN_COUNT = 16  # index entries along dim beyond which a float32 scatter uses atomics
OP_BITS = {"gather": 1, "index_select": 2, "embedding": 4, "scatter_add": 8, "index_add": 16,
           "embedding_backward": 32, "cross_entropy": 64}
READ_INDEX = {
    "int32": "return idx[k];",
    # int64: the low word when it fits in i32, else out of range in the right direction
    "int64": "let v = idx[k]; if (v.y == select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) "
             "{ return bitcast<i32>(v.x); } return select(2147483646, -1, bitcast<i32>(v.y) < 0);",
}
ATOMIC_ADD = """fn add_at(i: u32, v: f32) {
    var old = atomicLoad(&out0[i]);
    loop {
        let r = atomicCompareExchangeWeak(&out0[i], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
}"""


def _raise_flagged(bits: int) -> None:
    names = [op for op, bit in OP_BITS.items() if bits & bit]
    raise IndexOutOfRange(f"{', '.join(names)} on wgpu: an index was out of range for the indexed dim (valid "
                          f"indices are 0..size-1; the error shows at this read because the GPU checks "
                          f"indices without stopping the host); check the indices given to {names[0]}")


def _error_flag(dev: Any) -> WgpuBuffer:
    """The device's index error flag (one u32), marked pending so the next host read checks it."""
    rec = dev.recorder
    if rec.error_flag is None:
        buf = new_buffer(dev, 4, "index error flag")
        dev.device.queue.write_buffer(buf.gpu, 0, bytes(4))
        rec.error_flag = (buf, _raise_flagged)
    rec.error_pending = True
    flag: WgpuBuffer = rec.error_flag[0]
    return flag


def _source(mode: str, dtype: DType, index: DType, has_x: bool) -> str:
    if index.name not in READ_INDEX:
        raise DTypeError(f"indices must be int64 or int32, got {index}")
    t = STORAGE_TYPE[dtype.name]
    out_type = "atomic<u32>" if mode == "atomic" else t
    lines = [f"@group(0) @binding(0) var<storage, read_write> out0: array<{out_type}>;"]
    slot = 1
    if has_x:
        lines.append(f"@group(0) @binding({slot}) var<storage, read> x: array<{t}>;")
        slot += 1
    lines.append(f"@group(0) @binding({slot}) var<storage, read> idx: array<{STORAGE_TYPE[index.name]}>;")
    slot += 1
    helpers = ""
    if mode == "gather":
        at_dim = "vec4<i32>(1, 0, 1, 0)"  # out and index
        body = ("    let j = max(checked_index(u32(off.z)), 0);\n"
                "    out0[u32(off.x)] = x[u32(off.y + j * cfg.strides[cfg.dim].y)];")
    elif mode == "atomic":  # one invocation per index entry
        lines.append(f"@group(0) @binding({slot}) var<storage, read> src: array<{t}>;")
        slot += 1
        helpers = ATOMIC_ADD
        at_dim = "vec4<i32>(0, 0, 1, 1)"  # index and src
        body = ("    let j = checked_index(u32(off.z));\n"
                "    if (j >= 0 && j != cfg.padding) {\n"
                "        add_at(u32(off.x + j * cfg.strides[cfg.dim].x), cfg.alpha * src[u32(off.w)]);\n"
                "    }")
    else:
        lines.append(f"@group(0) @binding({slot}) var<storage, read> src: array<{t}>;")
        slot += 1
        at_dim = "vec4<i32>(1, 1, 0, 0)"  # out and x
        base = load(dtype, "x[u32(off.y)]") if has_x else "0.0"
        body = (f"    var total = 0.0;\n"
                f"    if (i32(q) != cfg.padding && inside_index(i)) {{\n"
                f"        let s = cfg.strides[cfg.dim];\n"
                f"        for (var e = 0u; e < cfg.count; e++) {{\n"
                f"            if (checked_index(u32(off.z + i32(e) * s.z)) == i32(q)) {{\n"
                f"                total += {load(dtype, 'src[u32(off.w + i32(e) * s.w)]')};\n"
                f"            }}\n"
                f"        }}\n"
                f"    }}\n"
                f"    var r = {base} + cfg.alpha * total;\n"
                f"    if (i32(q) == cfg.padding) {{ r = 0.0; }}\n"
                f"    out0[u32(off.x)] = {store(dtype, 'r')};")
    lines.append(f"@group(0) @binding({slot}) var<storage, read_write> err: array<atomic<u32>>;")
    return render("index", include=("strided_grid", "dim_split"), BINDINGS="\n".join(lines), CONFIG=str(slot + 1),
                  READ_INDEX=READ_INDEX[index.name], AT_DIM=at_dim, BODY=body, HELPERS=helpers)


def _run(op: str, mode: str, out: TensorArg, x: TensorArg | None, index: TensorArg, src: TensorArg | None,
         dim: int, dim_size: int, index_strides: Sequence[int], ishape: Sequence[int] = (), count: int = 0,
         alpha: float = 1.0, padding: int | None = None) -> None:
    """mode "gather" or "scatter": the deterministic kernels over the output; "scatter" with more than
    ATOMIC_MIN_COUNT entries on a float32 output becomes a fill pass plus the atomic pass over `ishape`."""
    numel = out.numel
    if numel == 0:
        return
    ndim = len(out.shape)
    if ndim > MAX_DIMS:
        raise RumusError(f"wgpu {op}: at most {MAX_DIMS} dims, got {ndim}")
    dev = device_of([out], [index])
    ins = [t for t in (x, index, src) if t is not None]
    ins, _ = dealias(dev, [out], ins)
    it = iter(ins)
    x = next(it) if x is not None else None
    index = next(it)
    src = next(it) if src is not None else None
    if (mode == "scatter" and count > ATOMIC_MIN_COUNT and out.dtype.name == "float32"
            and not env_set(DETERMINISTIC)):
        # fill: the deterministic kernel with no entries to walk writes x (or 0, and the padding row)
        _dispatch(dev, op, "scatter", out, x, index, src, dim, dim_size, index_strides, out.shape, ishape, 0,
                  alpha, padding)
        _dispatch(dev, op, "atomic", out, None, index, src, dim, dim_size, index_strides, ishape, ishape, count,
                  alpha, padding)
        return
    _dispatch(dev, op, mode, out, x, index, src, dim, dim_size, index_strides, out.shape, ishape, count, alpha,
              padding)


def _dispatch(dev: Any, op: str, mode: str, out: TensorArg, x: TensorArg | None, index: TensorArg,
              src: TensorArg | None, dim: int, dim_size: int, index_strides: Sequence[int],
              shape: Sequence[int], ishape: Sequence[int], count: int, alpha: float, padding: int | None) -> None:
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0:
        return
    ndim = len(shape)
    prog = dev.programs.get(("index", mode, out.dtype.name, index.dtype.name, x is not None),
                            lambda: _source(mode, out.dtype, index.dtype, x is not None))
    gx, gy, _ = grid((numel + WG - 1) // WG, dev.max_groups)
    zeros = [0] * ndim
    cols = [out.strides, x.strides if x is not None else zeros, index_strides, src.strides if src else zeros]
    words = [numel, ndim, gx * WG, dim, dim_size, count, i32_word(-1 if padding is None else padding),
             f32_bits(alpha), OP_BITS[op], 0, 0, 0]
    words += [out.offset, x.offset if x is not None else 0, index.offset, src.offset if src else 0]
    words += [*shape, *([1] * (MAX_DIMS - ndim))]
    words += [*(ishape or shape), *([1] * (MAX_DIMS - ndim))]
    for d in range(MAX_DIMS):
        words += [i32_word(c[d]) if d < ndim else 0 for c in cols]
    buffers = [out.buffer, *(t.buffer for t in (x, index, src) if t is not None), _error_flag(dev)]
    dev.recorder.dispatch(prog, buffers, struct.pack(f"<{len(words)}I", *words), (gx, gy, 1))


def gather(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index) = outputs[0], inputs
    if not x.shape:  # 0-d: a copy
        x, index = _as_1d(x), _as_1d(index)
        out = _as_1d(out)
    dim = int(attrs.get("dim", 0))
    _run("gather", "gather", out, x, index, None, dim, x.shape[dim], index.strides)


def _index_select(op: str, out: TensorArg, x: TensorArg, index: TensorArg, dim: int) -> None:
    stride = index.strides[0] if index.shape else 0
    _run(op, "gather", out, x, index, None, dim, x.shape[dim],
         [stride if d == dim else 0 for d in range(len(x.shape))])


def index_select(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    _index_select("index_select", outputs[0], inputs[0], inputs[1], int(attrs.get("dim", 0)))


def embedding(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (weight, indices) = outputs[0], inputs
    n = indices.numel
    flat = TensorArg(indices.buffer, (n,), (1,), indices.offset, indices.dtype)
    rows = TensorArg(out.buffer, (n, weight.shape[1]), (weight.shape[1], 1), out.offset, out.dtype)
    _index_select("embedding", rows, weight, flat, 0)


def scatter_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index, src) = outputs[0], inputs
    if not x.shape:
        out, x, index, src = (_as_1d(t) for t in (out, x, index, src))
    dim = int(attrs.get("dim", 0))
    _run("scatter_add", "scatter", out, x, index, src, dim, x.shape[dim], index.strides, ishape=index.shape,
         count=index.shape[dim])


def index_add(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (x, index, source) = outputs[0], inputs
    dim = int(attrs.get("dim", 0))
    n = index.shape[0] if index.shape else 1
    stride = index.strides[0] if index.shape else 0
    strides = [stride if d == dim else 0 for d in range(len(x.shape))]
    ishape = [n if d == dim else s for d, s in enumerate(x.shape)]
    _run("index_add", "scatter", out, x, index, source, dim, x.shape[dim], strides, ishape=ishape, count=n,
         alpha=float(attrs.get("alpha", 1.0)))


def embedding_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    out, (grad, indices) = outputs[0], inputs
    n, d = indices.numel, out.shape[1]
    flat = TensorArg(indices.buffer, (n,), (1,), indices.offset, indices.dtype)
    rows = TensorArg(grad.buffer, (n, d), (d, 1), grad.offset, grad.dtype)
    pad = attrs.get("padding_idx")
    _run("embedding_backward", "scatter", out, None, flat, rows, 0, out.shape[0], [1, 0], ishape=[n, d], count=n,
         padding=None if pad is None else int(pad))


def _as_1d(t: TensorArg) -> TensorArg:
    return TensorArg(t.buffer, (1,), contiguous_strides((1,)), t.offset, t.dtype)


def kernels() -> dict[str, Any]:
    return {"gather": gather, "index_select": index_select, "embedding": embedding, "scatter_add": scatter_add,
            "index_add": index_add, "embedding_backward": embedding_backward}

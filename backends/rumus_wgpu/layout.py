"""Host-side helpers shared by the kernel groups: dtypes in WGSL, dim coalescing, grids, aliasing."""

from __future__ import annotations

import struct
from collections.abc import Hashable, Sequence
from typing import Any

from rumus_contracts import DType, DTypeError, RumusError, TensorArg

from .knobs import env_set as env_set  # the per-op knob read (knobs.py), for the kernel groups
from .pool import WgpuBuffer

WG = 256
NOVEC = "RUMUS_WGPU_NOVEC"
LAUNCH_PLANS = 4096  # cached launches per device (see remember)


def remember(plans: dict[Hashable, Any], key: Hashable, value: Any) -> None:
    """Cache a launch plan; a full cache starts over (layouts of a training loop refill it at once)."""
    if len(plans) >= LAUNCH_PLANS:
        plans.clear()
    plans[key] = value


# WGSL storage element type and compute kind of each dtype with kernels: f = f32 math (f16 storage is
# widened), i = i32, l = int64 as vec2<u32>, b = bool stored as one u32 (0 or 1) per element.
STORAGE_TYPE = {"float32": "f32", "float16": "f16", "int32": "i32", "int64": "vec2<u32>", "bool": "u32"}
KIND = {"float32": "f", "float16": "f", "int32": "i", "int64": "l", "bool": "b"}
COMPUTE_TYPE = {"f": "f32", "i": "i32", "l": "vec2<u32>", "b": "bool"}


def kind(dtype: DType) -> str:
    try:
        return KIND[dtype.name]
    except KeyError:
        raise DTypeError(f"the wgpu backend has no kernels for {dtype}; it computes in float32, float16, "
                         f"int32, int64 and bool") from None


# (load, store) of the dtypes whose storage type is not their compute kind: float16 computes in f32,
# bool is stored as a u32 word
_CONVERSIONS = {"float16": ("f32({})", "f16({})"), "bool": ("({} != 0u)", "select(0u, 1u, {})")}


def load(dtype: DType, ref: str) -> str:
    """WGSL expression: a stored element as its compute kind."""
    return _CONVERSIONS.get(dtype.name, ("{}", "{}"))[0].format(ref)


def store(dtype: DType, value: str) -> str:
    """WGSL expression: a compute-kind value as the stored element."""
    return _CONVERSIONS.get(dtype.name, ("{}", "{}"))[1].format(value)


# NaN tested on the bits: WGSL lets a compiler assume `x != x` is false.
_IS_NAN = "((bitcast<u32>({0}) & 0x7fffffffu) > 0x7f800000u)"
# float -> int saturates and maps NaN to 0, exactly as the CPU backend's C casts (csrc/copy.c and
# docs/ARCHITECTURE.md "Casts"); 2^31 and -2^31 are exact in f32, so the comparisons are exact.
_F32_TO_I32 = ("select(select(select(i32({0}), 2147483647i, {0} >= 2147483648.0), -2147483647i - 1i, "
               "{0} < -2147483648.0), 0i, " + _IS_NAN + ")")
_CONVERT = {
    ("f", "i"): _F32_TO_I32, ("f", "l"): "select(i64_from_f32({0}), vec2<u32>(0u, 0u), " + _IS_NAN + ")",
    # truthy on the bits: NaN is true, as in C, and a subnormal is true although GPUs may flush it to zero in a
    # float compare (the H200 did: bfloat16 0x0001 cast to bool read False)
    ("f", "b"): "((bitcast<u32>({0}) & 0x7fffffffu) != 0u)",
    ("i", "f"): "f32({})", ("i", "l"): "i64_from_i32({})", ("i", "b"): "({} != 0)",
    ("l", "f"): "i64_to_f32({})", ("l", "i"): "bitcast<i32>(({}).x)", ("l", "b"): "any(({}) != vec2<u32>(0u))",
    ("b", "f"): "select(0.0, 1.0, {})", ("b", "i"): "select(0, 1, {})", ("b", "l"): "vec2<u32>(select(0u, 1u, {}), 0u)",
}


def convert(value: str, src: str, dst: str) -> str:
    """WGSL expression converting between compute kinds (floats to ints truncate toward zero and saturate;
    NaN becomes 0)."""
    return value if src == dst else _CONVERT[(src, dst)].format(value)


def f32_bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def i32_word(x: int) -> int:
    return int(x) & 0xFFFFFFFF


def coalesce(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every tensor at once.

    Returns (sizes, per-dim strides) with per-dim strides listing each tensor's stride.
    """
    sizes: list[int] = []
    dims: list[list[int]] = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        st = [s[d] for s in strides]
        if sizes and all(p == c * size for p, c in zip(dims[-1], st)):
            sizes[-1] *= size
            dims[-1] = st
        else:
            sizes.append(size)
            dims.append(st)
    return sizes, dims


def grid(groups: int, max_groups: int) -> tuple[int, int, int]:
    """A 2-D grid holding `groups` workgroups (x * y >= groups)."""
    x = max(1, min(groups, max_groups))
    y = (groups + x - 1) // x
    if y > max_groups:
        raise RumusError(f"wgpu: {groups} workgroups exceed the dispatch limit of this device")
    return x, y, 1


def device_of(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg]) -> Any:
    for t in (*outputs, *inputs):
        buf = t.buffer
        if isinstance(buf, WgpuBuffer):
            return buf.dev
        raise RumusError(f"wgpu kernel got a buffer of another backend ({type(buf).__name__}); "
                         f"move the tensors to the wgpu device first")
    raise RumusError("wgpu kernel called without tensors")


def readable_inputs(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg]) -> tuple[Any, list[TensorArg]]:
    """A kernel's device and its inputs, each safe to bind read-only next to the outputs (see dealias)."""
    dev = device_of(outputs, inputs)
    return dev, dealias(dev, outputs, inputs)[0]


def new_buffer(dev: Any, nbytes: int, label: str = "") -> WgpuBuffer:
    gpu, size = dev.pool.acquire(nbytes, label)
    return WgpuBuffer(gpu, nbytes, size, dev)


def same_view(a: TensorArg, b: TensorArg) -> bool:
    return a.offset == b.offset and tuple(a.shape) == tuple(b.shape) and tuple(a.strides) == tuple(b.strides) \
        and a.dtype == b.dtype


def dealias(dev: Any, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
            allow_identical: bool = False) -> tuple[list[TensorArg], dict[int, int]]:
    """WebGPU forbids binding one buffer as writable and readable in one dispatch.

    Inputs sharing a buffer with an output are read from a fresh copy of that buffer, except (when the
    kernel supports it) inputs that are exactly an output's view: those map input index -> output
    index and the kernel reads them through the output's binding.
    """
    out_bufs = {id(o.buffer): j for j, o in enumerate(outputs)}
    if not out_bufs:
        return list(inputs), {}
    result = list(inputs)
    aliases: dict[int, int] = {}
    copies: dict[int, WgpuBuffer] = {}
    for k, t in enumerate(inputs):
        j = out_bufs.get(id(t.buffer))
        if j is None:
            continue
        if allow_identical and same_view(t, outputs[j]):
            aliases[k] = j
            continue
        src = t.buffer
        tmp = copies.get(id(src))
        if tmp is None:
            tmp = copies[id(src)] = new_buffer(dev, src.nbytes)
            dev.recorder.copy(src, 0, tmp, 0, (src.nbytes + 3) & ~3)
        result[k] = TensorArg(tmp, t.shape, t.strides, t.offset, t.dtype)
    return result, aliases


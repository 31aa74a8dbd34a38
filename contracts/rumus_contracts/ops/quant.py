"""Quantized weights: q8 blocks (SPEC C) and int4 groups (SPEC D) — pack, unpack and matmul ops.

Layouts, byte for byte (every backend and every file reads and writes exactly these words):

q8(block_size), weight [K, N]: column-major blocks. Column n holds nb = ceil(K / block_size) blocks;
block (n, b) starts at word (n * nb + b) * (1 + block_size / 4). Its first word is the header (low 16
bits: the f16 scale, high 16 bits zero), then block_size int8 values, four per word, byte j of word w
being element 4w + j. Elements k >= K (the padding of the last block of a column) are 0; a block never
straddles columns. scale = f16(f32(absmax) / 127) (f16 1.0 when absmax is 0) and
q = clamp(rint(x * 127 / absmax), -128, 127) computed in float64 (rint: half to even).

int4(group_size), weight [K, N]: padded_k = ceil(K / group_size) * group_size; word (k / 8) * N + n holds
row k's nibble at bits 4 * (k % 8) (lowest nibble = smallest k); padding rows k >= K hold 0. Per
(group g, column n), in float32 arithmetic over the real rows of the group: scale = (max - min) / 15
(1.0 when max - min <= 1e-10), zp = clamp(rint(-min / scale), 0, 15),
q = clamp(rint(v / scale + zp), 0, 15); dequantize (q - zp) * scale. scales and zero points are
float32 [num_groups, N].

The packing ops hand their words back as int32 (the bit patterns of the uint32 words), because a
generic op output is one element per logical element; `rumus.quant` rewraps them as q8 / int4 tensors.
The matmul ops dispatch on the float32 activation x and read the block / group size from the weight's
dtype. These references are also the host-side packers that `rumus.quant` uses for GPTQ / AWQ output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, float32, int4, int32, q8
from ..errors import DTypeError, RumusError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from ..tensor_arg import TensorArg

# The block / group sizes every backend provides kernels for (dtypes are parametrised, the registry is not).
Q8_BLOCK_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256)
INT4_GROUP_SIZES: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
Q8_DTYPES: tuple[DType, ...] = tuple(q8(b) for b in Q8_BLOCK_SIZES)
INT4_DTYPES: tuple[DType, ...] = tuple(int4(g) for g in INT4_GROUP_SIZES)
INT4_FLAT_RANGE = np.float32(1e-10)


# ---- sizes -------------------------------------------------------------------------------------------

def q8_num_words(k: int, n: int, block_size: int) -> int:
    """Words of a q8 [K, N] weight: N * ceil(K / bs) blocks of (1 + bs / 4) words (a multiple of 4 bytes)."""
    return n * (-(-k // block_size)) * (1 + block_size // 4)


def int4_num_words(k: int, n: int, group_size: int) -> int:
    return (-(-k // group_size)) * group_size // 8 * n


def int4_num_groups(k: int, group_size: int) -> int:
    return -(-k // group_size)


# ---- f16 bits (numpy's conversion rounds to nearest even, like the C and WGSL code) -----------------

def f16_bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float32).astype(np.float16).view(np.uint16)


def f16_value(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float32)


# ---- q8 (SPEC C) -------------------------------------------------------------------------------------

def q8_pack(w: np.ndarray, block_size: int) -> np.ndarray:
    """float [K, N] -> uint32 words of q8(block_size), exactly as SPEC C / the module docstring say."""
    w32 = np.asarray(w, np.float32)
    if w32.ndim != 2:
        raise ShapeError(f"q8 quantization takes a 2-D [K, N] weight, got shape {w32.shape}")
    k, n = w32.shape
    nb = -(-k // block_size)
    cols = np.zeros((n, nb * block_size), np.float32)
    cols[:, :k] = w32.T
    blocks = cols.reshape(n * nb, block_size)
    absmax = np.abs(blocks).max(axis=1) if blocks.size else np.zeros(0, np.float32)
    nz = absmax > 0
    scale = np.where(nz, absmax / np.float32(127), np.float32(1.0)).astype(np.float32)
    denom = np.where(nz, absmax, 1.0).astype(np.float64)[:, None]
    q = np.where(nz[:, None], np.rint(blocks.astype(np.float64) * 127.0 / denom), 0.0)
    q8v = np.clip(q, -128, 127).astype(np.int8)
    words = np.empty((n * nb, 1 + block_size // 4), np.uint32)
    words[:, 0] = f16_bits(scale).astype(np.uint32)
    words[:, 1:] = q8v.view(np.uint8).reshape(n * nb, block_size // 4, 4).copy().view("<u4")[..., 0]
    return words.reshape(-1)


def q8_unpack(words: np.ndarray, k: int, n: int, block_size: int) -> np.ndarray:
    """uint32 words -> float32 [K, N]: q * f32(f16(scale))."""
    nb = -(-k // block_size)
    blk = np.asarray(words).view(np.uint32).reshape(n * nb, 1 + block_size // 4)
    scale = f16_value((blk[:, 0] & 0xFFFF).astype(np.uint16))
    q = np.ascontiguousarray(blk[:, 1:]).astype("<u4").view(np.int8).reshape(n * nb, block_size)
    vals = q.astype(np.float32) * scale[:, None]
    return np.ascontiguousarray(vals.reshape(n, nb * block_size)[:, :k].T)


# ---- int4 (SPEC D) -----------------------------------------------------------------------------------

def int4_params(w: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Round-to-nearest scales and zero points [G, N] float32 for a [K, N] weight (SPEC D)."""
    w32 = np.asarray(w, np.float32)
    k, n = w32.shape
    g_count = int4_num_groups(k, group_size)
    scales = np.ones((g_count, n), np.float32)
    zps = np.zeros((g_count, n), np.float32)
    for g in range(g_count):
        vals = w32[g * group_size:min(k, (g + 1) * group_size)]
        lo, hi = vals.min(axis=0), vals.max(axis=0)
        rng = (hi - lo).astype(np.float32)
        s = np.where(rng <= INT4_FLAT_RANGE, np.float32(1.0), rng / np.float32(15)).astype(np.float32)
        scales[g] = s
        zps[g] = np.clip(np.rint(-lo / s), 0, 15) + np.float32(0)  # + 0: no -0.0 zero points
    return scales, zps


def int4_codes(w: np.ndarray, scales: np.ndarray, zps: np.ndarray, group_size: int) -> np.ndarray:
    """q = clamp(rint(v / scale + zp), 0, 15) in float32, as uint8 [K, N]."""
    w32 = np.asarray(w, np.float32)
    rows = np.arange(w32.shape[0]) // group_size
    s, z = np.asarray(scales, np.float32)[rows], np.asarray(zps, np.float32)[rows]
    out: np.ndarray = np.clip(np.rint(w32 / s + z), 0, 15).astype(np.uint8)
    return out


def int4_pack_codes(q: np.ndarray, group_size: int) -> np.ndarray:
    """uint8 codes [K, N] (0..15) -> the K-major nibble words of SPEC D; padding rows are 0."""
    k, n = q.shape
    padded = int4_num_groups(k, group_size) * group_size
    full = np.zeros((padded, n), np.uint32)
    full[:k] = q
    by8 = full.reshape(padded // 8, 8, n)
    words = np.zeros((padded // 8, n), np.uint32)
    for j in range(8):
        words |= by8[:, j, :] << np.uint32(4 * j)
    return words.reshape(-1)


def int4_unpack_codes(words: np.ndarray, k: int, n: int) -> np.ndarray:
    """The K-major nibble words -> uint8 codes [K, N]."""
    if n == 0 or k == 0:
        return np.zeros((k, n), np.uint8)
    w = np.asarray(words).view(np.uint32).reshape(-1, n)
    nib = np.stack([(w >> np.uint32(4 * j)) & np.uint32(0xF) for j in range(8)], axis=1)
    return nib.reshape(-1, n)[:k].astype(np.uint8)


def int4_dequant(q: np.ndarray, scales: np.ndarray, zps: np.ndarray, group_size: int) -> np.ndarray:
    rows = np.arange(q.shape[0]) // group_size
    s, z = np.asarray(scales, np.float32)[rows], np.asarray(zps, np.float32)[rows]
    out: np.ndarray = ((q.astype(np.float32) - z) * s).astype(np.float32)
    return out


# ---- conformance references (raw arrays in, raw arrays out) -------------------------------------------

def q8_quantize_reference(w: np.ndarray, *, block_size: int) -> np.ndarray:
    return q8_pack(w, block_size).view(np.int32)


def q8_dequantize_reference(words: np.ndarray, *, k: int, n: int, block_size: int | None = None) -> np.ndarray:
    if block_size is None:
        raise DTypeError("the q8_dequantize reference needs block_size (it never sees dtypes)")
    return q8_unpack(words, k, n, block_size).astype(np.float64)


def q8_linear_reference(x: np.ndarray, words: np.ndarray, *, n: int, block_size: int | None = None) -> np.ndarray:
    if block_size is None:
        raise DTypeError("the q8_linear reference needs block_size (it never sees dtypes)")
    w = q8_unpack(words, x.shape[1], n, block_size).astype(np.float64)
    return np.asarray(x, np.float64) @ w


def int4_quantize_reference(w: np.ndarray, *, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scales, zps = int4_params(w, group_size)
    words = int4_pack_codes(int4_codes(w, scales, zps, group_size), group_size)
    return words.view(np.int32), scales.astype(np.float64), zps.astype(np.float64)


def int4_dequantize_reference(words: np.ndarray, scales: np.ndarray, zps: np.ndarray, *, k: int,
                              group_size: int | None = None) -> np.ndarray:
    if group_size is None:
        raise DTypeError("the int4_dequantize reference needs group_size (it never sees dtypes)")
    n = np.asarray(scales).shape[1]
    return int4_dequant(int4_unpack_codes(words, k, n), scales, zps, group_size).astype(np.float64)


def int4_linear_reference(x: np.ndarray, words: np.ndarray, scales: np.ndarray, zps: np.ndarray, *,
                          group_size: int | None = None) -> np.ndarray:
    if group_size is None:
        raise DTypeError("the int4_linear reference needs group_size (it never sees dtypes)")
    k = np.asarray(x).shape[1]
    w = int4_dequantize_reference(words, scales, zps, k=k, group_size=group_size)
    out: np.ndarray = np.asarray(x, np.float64) @ w
    return out


# ---- shape and dtype rules ---------------------------------------------------------------------------

def _check_param(op: str, dt: DType, family: str, allowed: tuple[DType, ...], want: int | None) -> int:
    if dt not in allowed:
        raise DTypeError(f"{op}: the weight must be one of {', '.join(map(str, allowed))}, got {dt}; quantize "
                         f"with rumus.quant using a supported {family}")
    assert dt.param is not None
    if want is not None and want != dt.param:
        raise DTypeError(f"{op}: attribute {want} does not match the weight's {family} {dt.param}")
    return dt.param


def _need_size(op: str, attrs: Mapping[str, Any], name: str, allowed: tuple[int, ...]) -> int:
    v = attrs.get(name)
    if v not in allowed:
        raise DTypeError(f"{op}: {name} must be one of {allowed}, got {v!r}")
    return int(v)


def _weight_2d(op: str, shape: Shape) -> tuple[int, int]:
    if len(shape) != 2:
        raise ShapeError(f"{op}: needs a 2-D [K, N] float weight (in_features x out_features), got {shape}")
    return int(shape[0]), int(shape[1])


def _words_1d(op: str, shape: Shape, want: int) -> None:
    if tuple(shape) != (want,):
        raise ShapeError(f"{op}: the packed weight must have shape ({want},) for these sizes, got {tuple(shape)}")


def _q8_quantize_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    k, n = _weight_2d("q8_quantize", shapes[0])
    bs = _need_size("q8_quantize", attrs, "block_size", Q8_BLOCK_SIZES)
    return [(q8_num_words(k, n, bs),)]


def _q8_dequantize_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    k, n = int(attrs["k"]), int(attrs["n"])
    if k < 0 or n < 0:
        raise ShapeError(f"q8_dequantize: k and n must be >= 0, got {k} and {n}")
    return [(k, n)]


def _q8_dequantize_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    _check_param("q8_dequantize", dtypes[0], "block size", Q8_DTYPES, attrs.get("block_size"))
    return [float32]


def _q8_linear_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x = tuple(shapes[0])
    if len(x) != 2:
        raise ShapeError(f"q8_linear: x must be 2-D [M, K], got {x}")
    n = int(attrs["n"])
    if n < 0:
        raise ShapeError(f"q8_linear: n must be >= 0, got {n}")
    return [(x[0], n)]


def _q8_linear_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    if dtypes[0] != float32:
        raise DTypeError(f"q8_linear: x must be float32, got {dtypes[0]}")
    _check_param("q8_linear", dtypes[1], "block size", Q8_DTYPES, attrs.get("block_size"))
    return [float32]


def _int4_quantize_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    k, n = _weight_2d("int4_quantize", shapes[0])
    g = _need_size("int4_quantize", attrs, "group_size", INT4_GROUP_SIZES)
    groups = int4_num_groups(k, g)
    return [(int4_num_words(k, n, g),), (groups, n), (groups, n)]


def _int4_params_check(op: str, shapes: Sequence[Shape], k: int, g: int) -> int:
    s, z = tuple(shapes[-2]), tuple(shapes[-1])
    if len(s) != 2 or s != z:
        raise ShapeError(f"{op}: scales and zero points must both be [num_groups, N], got {s} and {z}")
    n = s[1]
    if s[0] != int4_num_groups(k, g):
        raise ShapeError(f"{op}: {s[0]} groups of scales, but K={k} with group_size {g} needs "
                         f"{int4_num_groups(k, g)}")
    _words_1d(op, shapes[-3], int4_num_words(k, n, g))
    return n


def _int4_dequantize_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [(int(attrs["k"]), tuple(shapes[2])[1] if len(shapes[2]) == 2 else 0)]


def _int4_dtype(op: str, words_at: int) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        if words_at and dtypes[0] != float32:
            raise DTypeError(f"{op}: x must be float32, got {dtypes[0]}")
        _check_param(op, dtypes[words_at], "group size", INT4_DTYPES, attrs.get("group_size"))
        if dtypes[-1] != float32 or dtypes[-2] != float32:
            raise DTypeError(f"{op}: scales and zero points must be float32, got {dtypes[-2]} and {dtypes[-1]}")
        return [float32]
    return rule


def _int4_linear_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x = tuple(shapes[0])
    if len(x) != 2:
        raise ShapeError(f"int4_linear: x must be 2-D [M, K], got {x}")
    s = tuple(shapes[2])
    return [(x[0], s[1] if len(s) == 2 else 0)]


# ---- conformance samples -------------------------------------------------------------------------

# (K, N): K % size != 0 on purpose (the original broke there), size-1, size-0 and a wide N
PACK_SHAPES: tuple[tuple[int, int], ...] = ((70, 3), (1, 1), (256, 5), (0, 4), (33, 17), (128, 0))


def _weights(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    w = rng.standard_normal((k, n))
    if k and n:
        w[:, 0] = 0.0  # an all-zero column: scale 1.0, codes 0
        if n > 2:
            w[:, 2] = 0.75  # a constant column: the int4 zero point must be rounded (SPEC D)
    return w


def _quantize_samples(key: str, sizes: tuple[int, ...], tag: str) -> Any:
    def gen(rng: np.random.Generator) -> Iterator[Sample]:
        for size in sizes:
            for k, n in PACK_SHAPES:
                yield Sample([_weights(rng, k, n)], {key: size}, grad=False, name=f"{tag}={size} [{k},{n}]",
                             dtypes=[float32])
    return gen


def _packed(scheme: str, w: np.ndarray, size: int) -> tuple[list[np.ndarray], list[DType]]:
    """The packed inputs of a q8 / int4 op (words, or words + scales + zero points) and their dtypes."""
    if scheme == "q8":
        return [q8_pack(w, size)], [q8(size)]
    words, scales, zps = int4_quantize_reference(w, group_size=size)
    return [words.view(np.uint32), scales.astype(np.float32), zps.astype(np.float32)], [int4(size), float32, float32]


def _words_samples(scheme: str, linear: bool) -> Any:
    """Samples of q8_ / int4_ dequantize (linear=False) or linear, over every size and PACK_SHAPES."""
    key, sizes, tag = ("block_size", Q8_BLOCK_SIZES, "bs") if scheme == "q8" else ("group_size", INT4_GROUP_SIZES, "g")

    def gen(rng: np.random.Generator) -> Iterator[Sample]:
        for size in sizes:
            for k, n in PACK_SHAPES:
                packed, dts = _packed(scheme, _weights(rng, k, n), size)
                # q8 words do not say N; int4 scales do
                attrs: dict[str, int] = {key: size, **({"n": n} if scheme == "q8" else {})}
                if not linear:
                    yield Sample(packed, {"k": k, **attrs}, grad=False, name=f"{tag}={size} [{k},{n}]", dtypes=dts)
                    continue
                for m in (1, 3):
                    x = rng.standard_normal((m, k)).astype(np.float32)
                    yield Sample([x, *packed], attrs, grad=False, name=f"{tag}={size} [{m},{k}]x[{k},{n}]",
                                 dtypes=[float32, *dts])
    return gen


def _q8_linear_errors() -> list[ErrorSample]:
    words = np.zeros(q8_num_words(40, 2, 32), np.uint32)
    x = np.zeros((2, 40), np.float32)
    return [
        ErrorSample([x, words], {"n": 2}, DTypeError, "q8(", dtypes=[float32, q8(8)]),
        ErrorSample([x[0], words], {"n": 2}, ShapeError, "2-D", dtypes=[float32, q8(32)]),
        ErrorSample([x, words[:-1]], {"n": 2}, ShapeError, "packed weight", dtypes=[float32, q8(32)]),
        ErrorSample([x, words], {"n": 2, "block_size": 64}, DTypeError, "does not match",
                    dtypes=[float32, q8(32)]),
    ]


def _int4_linear_errors() -> list[ErrorSample]:
    words, s, z = int4_quantize_reference(np.ones((40, 3)), group_size=16)
    x = np.zeros((2, 40), np.float32)
    packed = [words.view(np.uint32), s.astype(np.float32), z.astype(np.float32)]
    return [
        ErrorSample([x[:, :20], *packed], {}, ShapeError, "groups", dtypes=[float32, int4(16), float32, float32]),
        ErrorSample([x, packed[0][:-1], *packed[1:]], {}, ShapeError, "packed weight",
                    dtypes=[float32, int4(16), float32, float32]),
        ErrorSample([x, packed[0], packed[1], packed[2][:, :2]], {}, ShapeError, "zero points",
                    dtypes=[float32, int4(16), float32, float32]),
    ]


def _q8_quantize_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((4, 4))], {"block_size": 12}, DTypeError, "block_size", dtypes=[float32]),
            ErrorSample([np.zeros(4)], {"block_size": 32}, ShapeError, "2-D", dtypes=[float32])]


def register(registry: OpRegistry) -> None:
    exact = "byte-exact packing; unpacking is one float32 multiply, exact on every backend"
    registry.register(OpSchema(
        "q8_quantize", ("w",), _q8_quantize_shape, attrs={"block_size": 32}, dtype=lambda d, a: [int32],
        dtypes=(float32,), contiguous=("w",), reference=q8_quantize_reference,
        samples=_quantize_samples("block_size", Q8_BLOCK_SIZES, "bs"), error_samples=_q8_quantize_errors,
        tolerance_reason=exact,
        doc="float32 weight [K, N] -> q8(block_size) words (SPEC C) as int32 bit patterns"))
    registry.register(OpSchema(
        "q8_dequantize", ("w",), _q8_dequantize_shape, attrs={"k": 0, "n": 0, "block_size": None},
        dtype=_q8_dequantize_dtype, dtypes=Q8_DTYPES, reference=q8_dequantize_reference,
        samples=_words_samples("q8", False), tolerance_reason=exact,
        doc="q8 words -> float32 [k, n]: q * f32(f16(scale))"))
    registry.register(OpSchema(
        "q8_linear", ("x", "w"), _q8_linear_shape, attrs={"n": 0, "block_size": None}, dtype=_q8_linear_dtype,
        dtypes=(float32,), contiguous=("x",), reference=q8_linear_reference, samples=_words_samples("q8", True),
        error_samples=_q8_linear_errors, tolerance={"float32": (2e-5, 2e-5)},
        tolerance_reason="float32 dot products of up to 256 terms against a float64 reference",
        doc="x [M, K] float32 @ q8 weight [K, n] -> [M, n], dequantising inside the kernel"))
    registry.register(OpSchema(
        "int4_quantize", ("w",), _int4_quantize_shape, attrs={"group_size": 128},
        dtype=lambda d, a: [int32, float32, float32], dtypes=(float32,), num_outputs=3, contiguous=("w",),
        reference=int4_quantize_reference, samples=_quantize_samples("group_size", INT4_GROUP_SIZES, "g"),
        tolerance_reason=exact,
        doc="float32 weight [K, N] -> (int4 words as int32, scales [G, N], zero points [G, N]), round to nearest"))
    registry.register(OpSchema(
        "int4_dequantize", ("w", "scales", "zeros"), _int4_dequantize_shape,
        attrs={"k": 0, "group_size": None}, dtype=_int4_dtype("int4_dequantize", 0), dtypes=INT4_DTYPES,
        contiguous=("scales", "zeros"), reference=int4_dequantize_reference, samples=_words_samples("int4", False),
        tolerance_reason=exact, doc="int4 words + scales + zero points -> float32 [k, N]: (q - zp) * scale"))
    registry.register(OpSchema(
        "int4_linear", ("x", "w", "scales", "zeros"), _int4_linear_shape, attrs={"group_size": None},
        dtype=_int4_dtype("int4_linear", 1), dtypes=(float32,), contiguous=("x", "scales", "zeros"),
        reference=int4_linear_reference, samples=_words_samples("int4", True), error_samples=_int4_linear_errors,
        tolerance={"float32": (2e-5, 2e-5)},
        tolerance_reason="float32 dot products of up to 256 terms against a float64 reference",
        doc="x [M, K] float32 @ int4 weight [K, N] -> [M, N], dequantising inside the kernel"))


# validation the shape rules cannot do alone (they never see dtypes): the kernels call these
def check_q8_words(op: str, words_numel: int, k: int, n: int, block_size: int) -> None:
    _words_1d(op, (words_numel,), q8_num_words(k, n, block_size))


def check_int4(op: str, shapes: Sequence[Shape], k: int, group_size: int) -> int:
    return _int4_params_check(op, shapes, k, group_size)


def nonfinite_weight(op: str) -> RumusError:
    """A NaN or inf has no int8 / int4 code: every backend refuses it with this error."""
    return RumusError(f"{op}: the weight holds NaN or inf values; quantize finite weights only")


def _size_param(dt: DType) -> int:
    assert dt.param is not None  # quantized dtypes always carry their block / group size
    return dt.param


def q8_kernel_sizes(op: str, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg]) -> tuple[int, int, int, int]:
    """(m, k, n, block_size) of a q8_dequantize (m = 0) or q8_linear call, the words checked against them.
    Every backend's kernel starts here, so the checks are written once."""
    o, w = outputs[0], inputs[-1]
    bs = _size_param(w.dtype)
    m, k, n = (0, *o.shape) if op == "q8_dequantize" else (o.shape[0], inputs[0].shape[1], o.shape[1])
    check_q8_words(op, w.numel, k, n, bs)
    return m, k, n, bs


def int4_kernel_sizes(op: str, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg]) -> tuple[int, int, int, int]:
    """(m, k, n, group_size) of an int4_dequantize (m = 0) or int4_linear call, words / scales / zero
    points checked against them."""
    o, (w, s, z) = outputs[0], inputs[-3:]
    g = _size_param(w.dtype)
    m, k, n = (0, *o.shape) if op == "int4_dequantize" else (o.shape[0], inputs[0].shape[1], o.shape[1])
    check_int4(op, [w.shape, s.shape, z.shape], k, g)
    return m, k, n, g


"""Fixed-point i16 ops (SPEC E): linear layers, relu, requantization. CPU only, inference only.

A fixed_i16(s) tensor stores raw int16 q meaning q / 2**s; every op here works on raw values with
integer arithmetic only, so results are bit-exact on every machine. The references below use Python
ints (arbitrary precision), so they are the formula of SPEC E itself, not another implementation of
the same int64 tricks the C kernels use.

An absent bias is its own op, `fixed_linear_nobias(x, weight)`, rather than a flag plus a dummy
tensor: every input of an op is then a real tensor, and the kernel is shared (bias pointer NULL).

The scale comes from the inputs' dtype. `fixed_linear*` also take an optional `scale_log2` attribute:
None means "the inputs' scale"; when given it must equal that scale. The conformance samples pass it
because a reference only sees raw arrays and attributes, never dtypes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, fixed_i16, int64
from ..errors import DTypeError, RumusError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape

ROUNDING = "nearest_ties_away_from_zero"
OVERFLOW = "saturate_i16"
I16_MIN, I16_MAX = -32768, 32767
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
FIXED_DTYPES: tuple[DType, ...] = tuple(fixed_i16(s) for s in range(16))


# ---- the arithmetic of SPEC E, on Python ints -------------------------------------------------------

def requantize_int(acc: int, s: int) -> int:
    """s = 0 -> acc; else round half away from zero by 2**s; then saturate to int16 (never wrap)."""
    if s == 0:
        r = acc
    elif acc >= 0:
        r = (acc + (1 << (s - 1))) >> s
    else:
        r = -((-acc + (1 << (s - 1))) >> s)
    return max(I16_MIN, min(I16_MAX, r))


def linear_int(x: Sequence[int], w_col: Sequence[int], b: int | None, s: int) -> int:
    """One output element: acc = sum x[k] * w[k, n] (+ b[n] << s, before rounding); requantize."""
    acc = sum(int(a) * int(c) for a, c in zip(x, w_col, strict=True))
    if b is not None:
        acc += int(b) << s
    return requantize_int(acc, s)


def linear_reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *,
                     scale_log2: int | None = None) -> np.ndarray:
    """[M, K] x [K, N] (+ [N]) raw int16 values -> [M, N] raw int16, element by element in Python ints."""
    if scale_log2 is None:
        raise DTypeError("the fixed_linear reference needs the scale_log2 attribute (it never sees dtypes)")
    xs, ws = np.asarray(x).tolist(), np.asarray(weight).tolist()
    bs = None if bias is None else np.asarray(bias).tolist()
    m_rows, (k_dim, n_cols) = len(xs), np.asarray(weight).shape
    out = [[linear_int(xs[m], [ws[k][n] for k in range(k_dim)], None if bs is None else bs[n], scale_log2)
            for n in range(n_cols)] for m in range(m_rows)]
    return np.array(out, dtype=np.int16).reshape(m_rows, n_cols)


def linear_nobias_reference(x: np.ndarray, weight: np.ndarray, *, scale_log2: int | None = None) -> np.ndarray:
    return linear_reference(x, weight, None, scale_log2=scale_log2)


def relu_reference(x: np.ndarray) -> np.ndarray:
    arr = np.asarray(x)
    return np.array([max(0, int(v)) for v in arr.reshape(-1).tolist()], dtype=np.int16).reshape(arr.shape)


def requantize_reference(acc: np.ndarray, *, scale_log2: int) -> np.ndarray:
    arr = np.asarray(acc)
    flat = [requantize_int(int(v), scale_log2) for v in arr.reshape(-1).tolist()]
    return np.array(flat, dtype=np.int16).reshape(arr.shape)


# ---- shape and dtype rules ---------------------------------------------------------------------------

def _linear_shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        x, w = tuple(shapes[0]), tuple(shapes[1])
        if len(x) != 2 or len(w) != 2:
            raise ShapeError(f"{op}: needs x [M, K] and weight [K, N] (2-D), got {x} and {w}")
        if x[1] != w[0]:
            raise ShapeError(f"{op}: x {x} and weight {w} do not fit: in_features {x[1]} vs {w[0]} "
                             f"(the weight is [in, out])")
        if len(shapes) > 2:
            b = tuple(shapes[2])
            if b != (w[1],):
                raise ShapeError(f"{op}: bias must have shape ({w[1]},) for weight {w}, got {b}")
        return [(x[0], w[1])]
    return rule


def _fixed_same_scale(op: str) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        if not all(d.is_fixed for d in dtypes):
            raise DTypeError(f"{op}: every input must be a fixed-point fixed_i16(s) tensor, got "
                             f"{', '.join(str(d) for d in dtypes)}")
        scales = {d.param for d in dtypes}
        if len(scales) != 1:
            raise DTypeError(f"{op}: inputs have different fixed-point scales "
                             f"({', '.join(str(d) for d in dtypes)}); one scale_log2 is shared by all")
        want = attrs.get("scale_log2")
        if want is not None and want != dtypes[0].param:
            raise DTypeError(f"{op}: scale_log2={want} does not match the inputs' fixed-point scale "
                             f"{dtypes[0].param}")
        return [dtypes[0]]
    return rule


def _requantize_dtype(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    if dtypes[0] != int64:
        raise DTypeError(f"fixed_requantize: the accumulator must be int64, got {dtypes[0]}")
    s = attrs.get("scale_log2")
    if s is None:
        raise DTypeError("fixed_requantize: give scale_log2 (0..15), the shift of the requantization")
    return [fixed_i16(s)]  # refuses s outside 0..15 with a DTypeError


# ---- conformance samples -------------------------------------------------------------------------

def _i16(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int16)


def _rand_i16(rng: np.random.Generator, shape: Shape, lo: int = I16_MIN, hi: int = I16_MAX) -> np.ndarray:
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(np.int16)


# (x, weight, bias | None, s, name): SPEC E's exact FixedLinear cases and the canonical MLP's layers.
EXACT_LINEAR: tuple[tuple[list[list[int]], list[list[int]], list[int] | None, int, str], ...] = (
    ([[16, 32]], [[16], [48]], None, 4, "spec s=4 -> 112"),
    ([[20000, 20000]], [[256], [256]], [-10000], 8, "spec bias before saturation -> 30000"),
    ([[32767]], [[32767]], None, 0, "spec s=0 saturate high -> 32767"),
    ([[32767]], [[-32768]], None, 0, "spec s=0 saturate low -> -32768"),
    ([[256, 256]], [[256, -256], [256, 256]], None, 8, "canonical MLP layer 1 -> [512, 0]"),
    ([[512, 0]], [[256], [256]], [256], 8, "canonical MLP layer 2 -> [768]"),
)
# (acc values, s): SPEC E's exact requantize cases, grouped by shift.
EXACT_REQUANTIZE: tuple[tuple[tuple[int, ...], int], ...] = (
    ((2, 3, 5, 1, -1, -3, -5, 100000, -100000), 1),
    ((7, -7, 6, 2, 1, -1, -6), 2),
    ((12345, 40000, -40000), 0),
)
EXACT_RELU_INPUT: tuple[int, ...] = (-32768, -100, -1, 0, 1, 100, 32767)
# Every rounding boundary and the int64 extremes, where a naive `acc + half` or `-acc` would overflow.
EDGE_ACCS: tuple[int, ...] = (0, 1, -1, I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 32767, 32768, -32768,
                              -32769, 2**40 + 2**14, -(2**40) - 2**14)

LINEAR_SHAPES: tuple[tuple[int, int, int], ...] = ((3, 5, 4), (1, 1, 1), (0, 3, 2), (2, 0, 3), (17, 33, 9),
                                                   (4, 64, 130))


def _linear_samples(with_bias: bool) -> Any:
    def gen(rng: np.random.Generator) -> Iterator[Sample]:
        for x, w, b, s, name in EXACT_LINEAR:
            if (b is not None) != with_bias:
                continue
            arrays = [np.array(x, dtype=np.int16), np.array(w, dtype=np.int16)]
            if b is not None:
                arrays.append(np.array(b, dtype=np.int16))
            yield Sample(arrays, {"scale_log2": s}, grad=False, name=name, dtypes=[fixed_i16(s)] * len(arrays))
        for s in range(16):
            for m, k, n in LINEAR_SHAPES:
                arrays = [_rand_i16(rng, (m, k)), _rand_i16(rng, (k, n))]
                if with_bias:
                    arrays.append(_rand_i16(rng, (n,)))
                yield Sample(arrays, {"scale_log2": s}, grad=False, name=f"s={s} [{m},{k}]x[{k},{n}]",
                             dtypes=[fixed_i16(s)] * len(arrays))
            # all-extreme operands: the largest accumulators, saturating both ways
            arrays = [np.full((2, 8), I16_MIN, np.int16), np.array([[I16_MIN, I16_MAX]] * 8, np.int16)]
            if with_bias:
                arrays.append(_i16(I16_MAX, I16_MIN))
            yield Sample(arrays, {"scale_log2": s}, grad=False, name=f"s={s} extremes",
                         dtypes=[fixed_i16(s)] * len(arrays))
    return gen


def _relu_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for s in range(16):
        yield Sample([_i16(*EXACT_RELU_INPUT)], grad=False, name=f"spec s={s}", dtypes=[fixed_i16(s)])
    for i, shape in enumerate(((3, 4), (), (1,), (2, 1, 3), (0, 3), (5, 7, 6))):
        s = (3 * i) % 16
        yield Sample([_rand_i16(rng, shape)], grad=False, name=f"s={s} {shape}", dtypes=[fixed_i16(s)])


def _requantize_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for values, s in EXACT_REQUANTIZE:
        yield Sample([np.array(values, dtype=np.int64)], {"scale_log2": s}, grad=False,
                     name=f"spec s={s}", dtypes=[int64])
    for s in range(16):
        half = 1 << max(s - 1, 0)
        ties = [q * (1 << s) + half for q in range(-3, 3)] + [q * (1 << s) - half for q in range(-3, 3)]
        edges = np.array([*EDGE_ACCS, *ties], dtype=np.int64)
        yield Sample([edges], {"scale_log2": s}, grad=False, name=f"s={s} edges and ties", dtypes=[int64])
        shape = ((4, 5), (), (0,), (2, 3, 2))[s % 4]
        acc = rng.integers(-(1 << (16 + s)), 1 << (16 + s), size=shape, dtype=np.int64)
        yield Sample([acc], {"scale_log2": s}, grad=False, name=f"s={s} {shape}", dtypes=[int64])


def _linear_errors(with_bias: bool) -> Any:
    n_in = 3 if with_bias else 2

    def case(shapes: tuple[Shape, ...], attrs: dict[str, Any], error: type[RumusError], match: str,
             scales: tuple[int, ...] = (4, 4, 4)) -> ErrorSample:
        return ErrorSample([np.zeros(sh, np.int16) for sh in shapes[:n_in]], attrs, error, match,
                           dtypes=[fixed_i16(s) for s in scales[:n_in]])

    def gen() -> list[ErrorSample]:
        out = [
            case(((2, 3), (4, 2), (2,)), {}, ShapeError, "do not fit"),
            case(((3,), (3, 2), (2,)), {}, ShapeError, "2-D"),
            case(((2, 3), (3, 2), (2,)), {}, DTypeError, "different fixed-point scales", (4, 5, 4)),
            case(((2, 3), (3, 2), (2,)), {"scale_log2": 7}, DTypeError, "does not match"),
        ]
        if with_bias:
            out.append(case(((2, 3), (3, 2), (3,)), {}, ShapeError, "bias"))
            out.append(case(((2, 3), (3, 2), (2,)), {}, DTypeError, "different fixed-point", (4, 4, 0)))
        return out
    return gen


def _requantize_errors() -> list[ErrorSample]:
    return [
        ErrorSample([np.zeros(3, np.int64)], {"scale_log2": 16}, DTypeError, "0..15", dtypes=[int64]),
        ErrorSample([np.zeros(3, np.int64)], {}, DTypeError, "scale_log2", dtypes=[int64]),
    ]


def register(registry: OpRegistry) -> None:
    common: dict[str, Any] = {"dtypes": FIXED_DTYPES, "tolerance_reason": "integer-only: compared exactly"}
    registry.register(OpSchema(
        "fixed_linear", ("x", "weight", "bias"), _linear_shape("fixed_linear"), attrs={"scale_log2": None},
        dtype=_fixed_same_scale("fixed_linear"), reference=linear_reference, samples=_linear_samples(True),
        error_samples=_linear_errors(True), **common,
        doc="fixed-point x [M,K] @ weight [K,N] + bias [N]: int64 accumulation, bias << s added before "
            f"rounding ({ROUNDING}) and saturation ({OVERFLOW}); all three share one scale"))
    registry.register(OpSchema(
        "fixed_linear_nobias", ("x", "weight"), _linear_shape("fixed_linear_nobias"), attrs={"scale_log2": None},
        dtype=_fixed_same_scale("fixed_linear_nobias"), reference=linear_nobias_reference,
        samples=_linear_samples(False), error_samples=_linear_errors(False), **common,
        doc=f"fixed-point x [M,K] @ weight [K,N] with int64 accumulation, then {ROUNDING} and {OVERFLOW}"))
    registry.register(OpSchema(
        "fixed_relu", ("x",), lambda shapes, attrs: [tuple(shapes[0])], dtype=_fixed_same_scale("fixed_relu"),
        reference=relu_reference, samples=_relu_samples, **common,
        doc="max(q, 0) on raw values; the dtype (and scale) is kept"))
    registry.register(OpSchema(
        "fixed_requantize", ("acc",), lambda shapes, attrs: [tuple(shapes[0])], attrs={"scale_log2": None},
        dtype=_requantize_dtype, dtypes=(int64,), reference=requantize_reference, samples=_requantize_samples,
        error_samples=_requantize_errors, tolerance_reason="integer-only: compared exactly",
        doc=f"int64 accumulator -> fixed_i16(scale_log2): shift by scale_log2 with {ROUNDING}, then {OVERFLOW}"))

"""PyTorch's structural ops as composite schemas: the core builds them from kernels every backend
has (index_select, cat, where, sums), so no backend needs a kernel; registering them here puts them in the
conformance suite — forward values, non-contiguous inputs and gradients — on every backend.

The references are plain numpy (np.tril, np.roll, np.pad, ...); interpolate's follows PyTorch's documented
source-index rules (nearest: floor(dst * in / out); linear: half-pixel centres unless align_corners).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, float32, float64, int64
from ..schema import OpRegistry, OpSchema, Sample, Shape

MOVE: tuple[DType, ...] = (float32, float64, int64)  # pure data movement: exact in every dtype
FLOAT: tuple[DType, ...] = (float32, float64)


def _same(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [tuple(shapes[0])]


def _int_to_int64(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0] if dtypes[0].is_floating else int64]


def _signed(rng: np.random.Generator, shape: Shape, lo: float = 0.5, hi: float = 1.5) -> np.ndarray:
    """Values away from zero (norms and products have kinks there) with both signs."""
    out: np.ndarray = rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)
    return out


def _gen(cases: Sequence[tuple[Shape, Mapping[str, Any]]],
         values: Callable[[np.random.Generator, Shape], np.ndarray] = _signed) -> Callable[..., list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([values(rng, shape)], dict(attrs), name=f"{shape}/{dict(attrs)}") for shape, attrs in cases]
    return gen


# ---- shape rules ----------------------------------------------------------------------------------------
def _repeat_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    reps = tuple(attrs["repeats"])
    shape = (1,) * (len(reps) - len(shapes[0])) + tuple(shapes[0])
    return [tuple(r * s for r, s in zip(reps, shape))]


def _repeat_interleave_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    shape = list(shapes[0])
    shape[attrs["dim"]] *= int(attrs["repeats"])
    return [tuple(shape)]


def _norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    dims = [d % len(shapes[0]) for d in attrs["dims"]] if attrs["dims"] else list(range(len(shapes[0])))
    if attrs["keepdim"]:
        return [tuple(1 if i in dims else n for i, n in enumerate(shapes[0]))]
    return [tuple(n for i, n in enumerate(shapes[0]) if i not in dims)]


def _pad_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    shape = list(shapes[0])
    pad = tuple(attrs["pad"])
    for i in range(len(pad) // 2):
        shape[len(shape) - 1 - i] += pad[2 * i] + pad[2 * i + 1]
    return [tuple(shape)]


def _interpolate_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [tuple(shapes[0][:2]) + tuple(attrs["size"])]


# ---- references -----------------------------------------------------------------------------------------
def _norm_ref(x: np.ndarray, p: float, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
    axis = tuple(dims) if dims else None
    a = np.abs(x)
    if p == math.inf:
        out = np.max(a, axis=axis, keepdims=keepdim)
    elif p == 1:
        out = np.sum(a, axis=axis, keepdims=keepdim)
    else:
        out = np.sum(a ** p, axis=axis, keepdims=keepdim) ** (1.0 / p)
    return np.asarray(out)


_NP_PAD = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_ref(x: np.ndarray, pad: tuple[int, ...], mode: str, value: float) -> np.ndarray:
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=_NP_PAD[mode])  # type: ignore[call-overload, no-any-return]


def _interpolate_ref(x: np.ndarray, size: tuple[int, ...], mode: str, align_corners: bool) -> np.ndarray:
    out = x
    for k, n_out in enumerate(size):
        axis = 2 + k
        n_in = out.shape[axis]
        dst = np.arange(n_out, dtype=np.float64)
        if mode == "nearest":
            out = np.take(out, np.minimum(np.floor(dst * n_in / n_out).astype(np.int64), n_in - 1), axis=axis)
            continue
        if align_corners:
            src = dst * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
        else:
            src = np.maximum((dst + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = (src - i0).reshape([-1 if a == axis else 1 for a in range(out.ndim)])
        out = np.take(out, i0, axis=axis) * (1 - w) + np.take(out, i1, axis=axis) * w
    return out


def register(registry: OpRegistry) -> None:
    kw: dict[str, Any] = {"composite": True, "differentiable": ("x",)}
    tri_cases = [((4, 5), {"diagonal": 0}), ((4, 5), {"diagonal": -1}), ((2, 3, 3), {"diagonal": 1}),
                 ((3, 0), {"diagonal": 0}), ((1, 1), {"diagonal": 2})]
    registry.register(OpSchema("tril", ("x",), _same, attrs={"diagonal": 0}, dtypes=MOVE,
                               reference=lambda x, diagonal: np.tril(x, diagonal), samples=_gen(tri_cases),
                               doc="lower triangle of the last two dims, zeros elsewhere", **kw))
    registry.register(OpSchema("triu", ("x",), _same, attrs={"diagonal": 0}, dtypes=MOVE,
                               reference=lambda x, diagonal: np.triu(x, diagonal), samples=_gen(tri_cases),
                               doc="upper triangle of the last two dims, zeros elsewhere", **kw))
    registry.register(OpSchema(
        "flip", ("x",), _same, attrs={"dims": (0,)}, dtypes=MOVE,
        reference=lambda x, dims: np.flip(x, axis=tuple(dims)).copy(),
        samples=_gen([((5,), {"dims": (0,)}), ((3, 4), {"dims": (1,)}), ((2, 3, 4), {"dims": (0, 2)}),
                      ((0, 3), {"dims": (0,)})]), doc="reverse the order along dims", **kw))
    registry.register(OpSchema(
        "roll", ("x",), _same, attrs={"shifts": (1,), "dims": (0,)}, dtypes=MOVE,
        reference=lambda x, shifts, dims: np.roll(x, tuple(shifts), axis=tuple(dims)),
        samples=_gen([((5,), {"shifts": (2,), "dims": (0,)}), ((3, 4), {"shifts": (-1, 5), "dims": (0, 1)}),
                      ((2, 3, 4), {"shifts": (4,), "dims": (2,)}), ((1, 3), {"shifts": (1,), "dims": (0,)})]),
        doc="rotate elements along dims (elements pushed off one end come in at the other)", **kw))
    registry.register(OpSchema(
        "repeat", ("x",), _repeat_shape, attrs={"repeats": (1,)}, dtypes=MOVE,
        reference=lambda x, repeats: np.tile(x, tuple(repeats)),
        samples=_gen([((3,), {"repeats": (2,)}), ((2, 3), {"repeats": (2, 1)}), ((2, 3), {"repeats": (2, 1, 3)}),
                      ((0, 2), {"repeats": (3, 1)})]), doc="tile the tensor (torch.Tensor.repeat)", **kw))
    registry.register(OpSchema(
        "repeat_interleave", ("x",), _repeat_interleave_shape, attrs={"repeats": 1, "dim": 0}, dtypes=MOVE,
        reference=lambda x, repeats, dim: np.repeat(x, repeats, axis=dim),
        samples=_gen([((3,), {"repeats": 2, "dim": 0}), ((2, 3), {"repeats": 3, "dim": 1}),
                      ((2, 3), {"repeats": 0, "dim": 0})]), doc="repeat each element `repeats` times", **kw))
    scan_cases = [((7,), {"dim": 0}), ((3, 9), {"dim": 1}), ((5, 2), {"dim": 0}), ((2, 3, 4), {"dim": 2}),
                  ((0, 3), {"dim": 1}), ((1,), {"dim": 0})]
    # contiguous: a backend's scan kernel (sequential per row) walks rows of a dense [outer, n, inner] input
    registry.register(OpSchema("cumsum", ("x",), _same, attrs={"dim": 0}, dtype=_int_to_int64, dtypes=MOVE,
                               autocast="float32", contiguous=("x",),
                               reference=lambda x, dim: np.cumsum(x, axis=dim), samples=_gen(scan_cases),
                               doc="inclusive prefix sums along dim (ints sum in int64)", **kw))
    registry.register(OpSchema("cumprod", ("x",), _same, attrs={"dim": 0}, dtype=_int_to_int64, dtypes=FLOAT,
                               autocast="float32", contiguous=("x",),
                               reference=lambda x, dim: np.cumprod(x, axis=dim), samples=_gen(scan_cases),
                               doc="inclusive prefix products along dim", **kw))
    registry.register(OpSchema(
        "norm", ("x",), _norm_shape, autocast="float32", attrs={"p": 2.0, "dims": (), "keepdim": False}, dtypes=FLOAT,
        reference=_norm_ref,
        samples=_gen([((3, 4), {"p": 2.0, "dims": (), "keepdim": False}),
                      ((3, 4), {"p": 2.0, "dims": (1,), "keepdim": True}),
                      ((3, 4), {"p": 1.0, "dims": (0,), "keepdim": False}),
                      ((2, 3, 4), {"p": 3.0, "dims": (0, 2), "keepdim": False}),
                      ((3, 4), {"p": math.inf, "dims": (1,), "keepdim": False})],
                     values=lambda rng, s: rng.permutation(int(np.prod(s))).reshape(s) * 0.25 + 0.5),
        doc="vector p-norm over dims (all dims when empty); p = inf is max |x|", **kw))
    registry.register(OpSchema(
        "pad", ("x",), _pad_shape, attrs={"pad": (0, 0), "mode": "constant", "value": 0.0}, dtypes=FLOAT,
        reference=_pad_ref,
        samples=_gen([((2, 3, 4), {"pad": (1, 2), "mode": "constant", "value": 0.5}),
                      ((1, 2, 4, 5), {"pad": (2, 1, 3, 0), "mode": "reflect", "value": 0.0}),
                      ((1, 2, 3, 4), {"pad": (2, 3, 1, 1), "mode": "replicate", "value": 0.0}),
                      ((1, 2, 5), {"pad": (2, 1), "mode": "circular", "value": 0.0})]),
        doc="F.pad: (left, right) amounts from the last dim backwards", **kw))
    registry.register(OpSchema(
        "interpolate", ("x",), _interpolate_shape, attrs={"size": (1,), "mode": "nearest", "align_corners": False},
        dtypes=FLOAT, reference=_interpolate_ref,
        samples=_gen([((1, 2, 3, 4), {"size": (6, 8), "mode": "nearest", "align_corners": False}),
                      ((1, 2, 5, 3), {"size": (3, 7), "mode": "nearest", "align_corners": False}),
                      ((1, 2, 3, 4), {"size": (5, 7), "mode": "bilinear", "align_corners": False}),
                      ((2, 1, 3, 4), {"size": (6, 8), "mode": "bilinear", "align_corners": True}),
                      ((2, 3, 5), {"size": (7,), "mode": "linear", "align_corners": False})]),
        doc="F.interpolate by size: nearest / linear / bilinear", **kw))

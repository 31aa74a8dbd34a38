"""Normalization layers as fused forward ops plus one fused backward op each.

    layer_norm(x, weight, bias)               normalizes over the last weight.ndim dims
    rms_norm(x, weight)                       x / sqrt(mean(x^2) + eps) * weight over the last weight.ndim dims
    group_norm(x [N,C,*], weight, bias)       statistics per (sample, group of C/num_groups channels)
    batch_norm_stats(x [N,C,*])               -> (mean [C], biased var [C])
    batch_norm(x, weight, bias, mean, var)    (x - mean) / sqrt(var + eps) * weight + bias per channel

Each forward op has one output (the statistics of layer/rms/group norm are recomputed by the backward op
from x: one extra read of x instead of extra outputs to keep alive). `<name>_backward(grad, x, weight, ...)`
returns the gradients of x, weight (and bias); it is not differentiable itself (no double backward
through normalization).

batch_norm takes its statistics as inputs: running statistics in eval mode; with training=True they must
be `batch_norm_stats(x)`, and then the backward treats them as functions of x (the reference recomputes
them from x, so finite differences see the full dependence). Weights are required inputs: the core
passes ones/zeros for layers without affine parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, DType
from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape

# ---- shape rules ----------------------------------------------------------------------------------------


def _trailing(op: str, x: Shape, w: Shape, what: str = "weight") -> None:
    if len(w) < 1 or len(w) > len(x) or tuple(x[len(x) - len(w):]) != tuple(w):
        raise ShapeError(f"{op}: {what} of shape {tuple(w)} must match the trailing dims of the input {tuple(x)} "
                         f"(normalized_shape)")


def _layer_norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, w, b = (tuple(s) for s in shapes)
    _trailing("layer_norm", x, w)
    _trailing("layer_norm", x, b, "bias")
    return [x]


def _rows_backward_shape(op: str, grads: int) -> Any:
    """Shape rule of layer_norm_backward / rms_norm_backward: (grad, x, w) -> dx and `grads` weight-shaped
    gradients (dw, and db for layer_norm)."""
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        g, x, w = (tuple(s) for s in shapes)
        _trailing(op, x, w)
        if g != x:
            raise ShapeError(f"{op}: grad {g} and input {x} differ in shape")
        return [x, *([w] * grads)]
    return rule


_layer_norm_backward_shape = _rows_backward_shape("layer_norm_backward", 2)


def _rms_norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, w = (tuple(s) for s in shapes)
    _trailing("rms_norm", x, w)
    return [x]


_rms_norm_backward_shape = _rows_backward_shape("rms_norm_backward", 1)


def _channels(op: str, x: Shape, *params: tuple[str, Shape]) -> None:
    if len(x) < 2:
        raise ShapeError(f"{op}: input must have a batch and a channel dim [N, C, *], got shape {tuple(x)}")
    for name, p in params:
        if tuple(p) != (x[1],):
            raise ShapeError(f"{op}: {name} of shape {tuple(p)} must be [C] = ({x[1]},) for input {tuple(x)}")


def _groups(op: str, x: Shape, attrs: Mapping[str, Any]) -> None:
    g = int(attrs["num_groups"])
    if g < 1 or x[1] % g:
        raise ShapeError(f"{op}: {x[1]} channels cannot be split into num_groups={g} groups")


def _group_norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, w, b = (tuple(s) for s in shapes)
    _channels("group_norm", x, ("weight", w), ("bias", b))
    _groups("group_norm", x, attrs)
    return [x]


def _group_norm_backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    g, x, w = (tuple(s) for s in shapes)
    _channels("group_norm_backward", x, ("weight", w))
    _groups("group_norm_backward", x, attrs)
    if g != x:
        raise ShapeError(f"group_norm_backward: grad {g} and input {x} differ in shape")
    return [x, w, w]


def _stats_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x = tuple(shapes[0])
    _channels("batch_norm_stats", x)
    if x[1] and int(np.prod(x)) == 0:
        raise ShapeError(f"batch_norm_stats: input {x} has no values per channel")
    return [(x[1],), (x[1],)]


def _batch_norm_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x, w, b, m, v = (tuple(s) for s in shapes)
    _channels("batch_norm", x, ("weight", w), ("bias", b), ("mean", m), ("var", v))
    return [x]


def _batch_norm_backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    g, x, w, m, v = (tuple(s) for s in shapes)
    _channels("batch_norm_backward", x, ("weight", w), ("mean", m), ("var", v))
    if g != x:
        raise ShapeError(f"batch_norm_backward: grad {g} and input {x} differ in shape")
    return [x, w, w]


def _twice(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0], dtypes[0]]


def _thrice(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0], dtypes[0], dtypes[0]]


# ---- float64 references ---------------------------------------------------------------------------------

def _inner(x: np.ndarray, w: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(normalized axes, leading axes) for a weight covering x's trailing dims."""
    k = x.ndim - w.ndim
    return tuple(range(k, x.ndim)), tuple(range(k))


def _standardize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    mu = x.mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (x - mu) * rstd, rstd


def layer_norm_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    if not x.size:
        return x.copy()
    out: np.ndarray = _standardize(x, _inner(x, w)[0], eps)[0] * w + b
    return out


def _norm_backward(g: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, gxhat: np.ndarray,
                   axes: tuple[int, ...], centred: bool = True) -> np.ndarray:
    """d/dx of xhat = (x - mean) * rstd (centred) or x * rstd, given the gradient gxhat of xhat."""
    dot = (gxhat * xhat).mean(axis=axes, keepdims=True)
    base = gxhat - gxhat.mean(axis=axes, keepdims=True) if centred else gxhat
    out: np.ndarray = rstd * (base - xhat * dot)
    return out


def layer_norm_backward_reference(g: np.ndarray, x: np.ndarray, w: np.ndarray,
                                  eps: float = 1e-5) -> tuple[np.ndarray, ...]:
    axes, lead = _inner(x, w)
    if not x.size:
        return x.copy(), np.zeros_like(w), np.zeros_like(w)
    xhat, rstd = _standardize(x, axes, eps)
    return _norm_backward(g, xhat, rstd, g * w, axes), (g * xhat).sum(axis=lead), g.sum(axis=lead)


def _rms(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    out: np.ndarray = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return out


def rms_norm_reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    if not x.size:
        return x.copy()
    out: np.ndarray = x * _rms(x, _inner(x, w)[0], eps) * w
    return out


def rms_norm_backward_reference(g: np.ndarray, x: np.ndarray, w: np.ndarray,
                                eps: float = 1e-6) -> tuple[np.ndarray, ...]:
    axes, lead = _inner(x, w)
    if not x.size:
        return x.copy(), np.zeros_like(w)
    rinv = _rms(x, axes, eps)
    xhat = x * rinv
    return _norm_backward(g, xhat, rinv, g * w, axes, centred=False), (g * xhat).sum(axis=lead)


def _per_channel(p: np.ndarray, ndim: int) -> np.ndarray:
    return p.reshape((1, -1) + (1,) * (ndim - 2))


def group_norm_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, num_groups: int = 1,
                         eps: float = 1e-5) -> np.ndarray:
    if not x.size:
        return x.copy()
    xg = x.reshape(x.shape[0], num_groups, -1)
    xhat = _standardize(xg, (2,), eps)[0].reshape(x.shape)
    out: np.ndarray = xhat * _per_channel(w, x.ndim) + _per_channel(b, x.ndim)
    return out


def group_norm_backward_reference(g: np.ndarray, x: np.ndarray, w: np.ndarray, num_groups: int = 1,
                                  eps: float = 1e-5) -> tuple[np.ndarray, ...]:
    if not x.size:
        return x.copy(), np.zeros_like(w), np.zeros_like(w)
    n = x.shape[0]
    xhat, rstd = _standardize(x.reshape(n, num_groups, -1), (2,), eps)
    gxhat = (g * _per_channel(w, x.ndim)).reshape(n, num_groups, -1)
    gx = _norm_backward(g, xhat, rstd, gxhat, (2,)).reshape(x.shape)
    axes = (0, *range(2, x.ndim))
    return gx, (g * xhat.reshape(x.shape)).sum(axis=axes), g.sum(axis=axes)


def _bn_axes(x: np.ndarray) -> tuple[int, ...]:
    return (0, *range(2, x.ndim))


def batch_norm_stats_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    axes = _bn_axes(x)
    return x.mean(axis=axes), x.var(axis=axes)


def batch_norm_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, mean: np.ndarray, var: np.ndarray,
                         eps: float = 1e-5, training: bool = False) -> np.ndarray:
    if training and x.size:  # the statistics are functions of x
        mean, var = batch_norm_stats_reference(x)
    nd = x.ndim
    out: np.ndarray = ((x - _per_channel(mean, nd)) / np.sqrt(_per_channel(var, nd) + eps) * _per_channel(w, nd)
                       + _per_channel(b, nd))
    return out


def batch_norm_backward_reference(g: np.ndarray, x: np.ndarray, w: np.ndarray, mean: np.ndarray, var: np.ndarray,
                                  eps: float = 1e-5, training: bool = False) -> tuple[np.ndarray, ...]:
    axes, nd = _bn_axes(x), x.ndim
    invstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - _per_channel(mean, nd)) * _per_channel(invstd, nd)
    gb, gw = g.sum(axis=axes), (g * xhat).sum(axis=axes)
    scale = _per_channel(w * invstd, nd)
    if not training:
        return g * scale, gw, gb
    m = max(x.size // max(x.shape[1], 1), 1)
    return scale * (g - _per_channel(gb / m, nd) - xhat * _per_channel(gw / m, nd)), gw, gb


# ---- samples --------------------------------------------------------------------------------------------

LN_CASES: tuple[tuple[Shape, Shape], ...] = (
    ((4, 5), (5,)), ((2, 3, 4), (3, 4)), ((3, 1), (1,)), ((0, 4), (4,)), ((2, 1, 7), (7,)), ((3, 33), (33,)),
    ((6,), (6,)),
)
GN_CASES: tuple[tuple[Shape, int], ...] = (
    ((2, 6, 3, 3), 3), ((3, 4, 5), 2), ((2, 4), 4), ((1, 6, 2, 2), 1), ((2, 3, 2, 3), 3), ((0, 4, 2), 2),
)
BN_CASES: tuple[Shape, ...] = ((4, 3), (2, 3, 4, 5), (1, 2, 3, 3), (5, 2, 1), (3, 4, 2))


def _affine(rng: np.random.Generator, shape: Shape) -> list[np.ndarray]:
    return [rng.uniform(0.5, 1.5, shape), rng.uniform(-1, 1, shape)]


def _layer_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-2, 2, xs), *_affine(rng, ws)], {"eps": 1e-5}, name=f"{xs}/{ws}")
            for xs, ws in LN_CASES]


def _layer_norm_backward_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-2, 2, xs), rng.uniform(0.5, 1.5, ws)], {"eps": 1e-5},
                   name=f"{xs}/{ws}") for xs, ws in LN_CASES]


def _rms_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-2, 2, xs), rng.uniform(0.5, 1.5, ws)], {"eps": 1e-6}, name=f"{xs}/{ws}")
            for xs, ws in LN_CASES]


def _rms_norm_backward_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-2, 2, xs), rng.uniform(0.5, 1.5, ws)], {"eps": 1e-6},
                   name=f"{xs}/{ws}") for xs, ws in LN_CASES]


def _group_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-2, 2, xs), *_affine(rng, xs[1:2])], {"num_groups": g, "eps": 1e-5},
                   name=f"{xs}/g{g}") for xs, g in GN_CASES]


def _group_norm_backward_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-2, 2, xs), rng.uniform(0.5, 1.5, xs[1:2])],
                   {"num_groups": g, "eps": 1e-5}, name=f"{xs}/g{g}") for xs, g in GN_CASES]


def _bn_inputs(rng: np.random.Generator, xs: Shape, training: bool) -> list[np.ndarray]:
    x = rng.uniform(-2, 2, xs)
    if training:
        mean, var = batch_norm_stats_reference(x)
    else:
        mean, var = rng.uniform(-0.5, 0.5, xs[1:2]), rng.uniform(0.5, 2.0, xs[1:2])
    return [x, *_affine(rng, xs[1:2]), mean, var]


def _offset_x(rng: np.random.Generator) -> np.ndarray:
    """Channels at large offsets (a one-pass variance gives -0.25 for a constant 1e4 and -32 for 1e6): constant 1e4,
    constant -4096 (exact in every float dtype, so the reference and the kernel see the same values),
    and one ordinary channel."""
    x = np.empty((6, 3, 5))
    x[:, 0], x[:, 1], x[:, 2] = 1e4, -4096.0, rng.uniform(-2, 2, (6, 5))
    return x


def _offset_inputs(rng: np.random.Generator, training: bool) -> list[np.ndarray]:
    x = _offset_x(rng)
    mean, var = batch_norm_stats_reference(x)
    return [x, *_affine(rng, (3,)), mean, var]


def _batch_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample(_bn_inputs(rng, xs, t), {"eps": 1e-5, "training": t}, name=f"{xs}/{'train' if t else 'eval'}")
            for xs in BN_CASES for t in (True, False)] + [
        Sample(_offset_inputs(rng, t), {"eps": 1e-5, "training": t}, grad=False,
               name=f"constant channels at 1e4/{'train' if t else 'eval'}") for t in (True, False)]


def _batch_norm_backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for xs in BN_CASES:
        for t in (True, False):
            x, w, _, mean, var = _bn_inputs(rng, xs, t)
            out.append(Sample([rng.uniform(-1, 1, xs), x, w, mean, var], {"eps": 1e-5, "training": t},
                              name=f"{xs}/{'train' if t else 'eval'}"))
    for t in (True, False):
        x, w, _, mean, var = _offset_inputs(rng, t)
        out.append(Sample([rng.uniform(-1, 1, x.shape), x, w, mean, var], {"eps": 1e-5, "training": t}, grad=False,
                          name=f"constant channels at 1e4/{'train' if t else 'eval'}"))
    return out


def _stats_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-2, 2, xs)], name=f"{xs}") for xs in (*BN_CASES, (7, 33, 1, 5))] + [
        Sample([_offset_x(rng)], grad=False, name="constant channels at 1e4")]


def _layer_norm_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((3, 4)), z((5,)), z((5,))], {}, ShapeError, "trailing dims"),
            ErrorSample([z((3, 4)), z((4,)), z((3,))], {}, ShapeError, "bias")]


def _group_norm_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((2, 6, 3)), z((6,)), z((6,))], {"num_groups": 4}, ShapeError, "num_groups=4"),
            ErrorSample([z((2, 6, 3)), z((3,)), z((6,))], {"num_groups": 3}, ShapeError, "weight")]


def _batch_norm_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((4, 3)), z((3,)), z((3,)), z((2,)), z((3,))], {}, ShapeError, "mean"),
            ErrorSample([z((4,)), z((4,)), z((4,)), z((4,)), z((4,))], {}, ShapeError, "[N, C, *]")]


def _rms_norm_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((3, 4)), np.zeros((3,))], {}, ShapeError, "trailing dims")]


def _backward_errors(op: str, with_bias_stats: bool = False) -> Any:
    def gen() -> list[ErrorSample]:
        z = np.zeros
        extra = [z((4,)), z((4,))] if with_bias_stats else []
        attrs = {"num_groups": 2} if op == "group_norm_backward" else {}
        w = z((5,)) if op in ("layer_norm_backward", "rms_norm_backward") else z((4,))  # trailing vs channel
        return [ErrorSample([z((2, 4, 3)), z((2, 4, 5)), w, *extra], attrs, ShapeError, "differ in shape")]
    return gen


def _stats_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((5,))], {}, ShapeError, "[N, C, *]"),
            ErrorSample([np.zeros((0, 3))], {}, ShapeError, "no values per channel")]


def register(registry: OpRegistry) -> None:
    fl: dict[str, Any] = {"dtypes": FLOAT_DTYPES}
    registry.register(OpSchema(
        "layer_norm", ("x", "weight", "bias"), _layer_norm_shape, autocast="float32", attrs={"eps": 1e-5},
        contiguous=("x", "weight", "bias"), differentiable=("x", "weight", "bias"), reference=layer_norm_reference,
        samples=_layer_norm_samples, error_samples=_layer_norm_errors,
        doc="layer normalization over the trailing weight.ndim dims (biased variance), then weight and bias", **fl))
    registry.register(OpSchema(
        "layer_norm_backward", ("grad", "x", "weight"), _layer_norm_backward_shape, attrs={"eps": 1e-5},
        contiguous=("grad", "x", "weight"), num_outputs=3, dtype=_thrice, reference=layer_norm_backward_reference,
        samples=_layer_norm_backward_samples, error_samples=_backward_errors("layer_norm_backward"),
        tolerance={"float32": (1.3e-6, 5e-5)},
        tolerance_reason="rows of length 1 have zero variance, so rstd = 1/sqrt(eps) ~ 316 multiplies one float32 "
                         "rounding of g*w (fused multiply-add on GPUs, measured 1.5e-5 on the H200) where the "
                         "float64 reference gives exactly 0",
        doc="gradients (x, weight, bias) of layer_norm; the statistics are recomputed from x", **fl))
    registry.register(OpSchema(
        "rms_norm", ("x", "weight"), _rms_norm_shape, attrs={"eps": 1e-6}, contiguous=("x", "weight"),
        autocast="float32",
        differentiable=("x", "weight"), reference=rms_norm_reference, samples=_rms_norm_samples,
        error_samples=_rms_norm_errors,
        doc="x / sqrt(mean(x^2) + eps) * weight over the trailing weight.ndim dims", **fl))
    registry.register(OpSchema(
        "rms_norm_backward", ("grad", "x", "weight"), _rms_norm_backward_shape, attrs={"eps": 1e-6},
        contiguous=("grad", "x", "weight"), num_outputs=2, dtype=_twice, reference=rms_norm_backward_reference,
        samples=_rms_norm_backward_samples, error_samples=_backward_errors("rms_norm_backward"),
        doc="gradients (x, weight) of rms_norm", **fl))
    registry.register(OpSchema(
        "group_norm", ("x", "weight", "bias"), _group_norm_shape, attrs={"num_groups": 1, "eps": 1e-5},
        autocast="float32",
        contiguous=("x", "weight", "bias"), differentiable=("x", "weight", "bias"), reference=group_norm_reference,
        samples=_group_norm_samples, error_samples=_group_norm_errors,
        doc="group normalization of x [N, C, *]: statistics per sample and group, weight and bias per channel", **fl))
    registry.register(OpSchema(
        "group_norm_backward", ("grad", "x", "weight"), _group_norm_backward_shape,
        attrs={"num_groups": 1, "eps": 1e-5}, contiguous=("grad", "x", "weight"), num_outputs=3, dtype=_thrice,
        reference=group_norm_backward_reference, samples=_group_norm_backward_samples,
        error_samples=_backward_errors("group_norm_backward"),
        doc="gradients (x, weight, bias) of group_norm; the statistics are recomputed from x", **fl))
    registry.register(OpSchema(
        "batch_norm_stats", ("x",), _stats_shape, autocast="float32", contiguous=("x",), num_outputs=2, dtype=_twice,
        reference=batch_norm_stats_reference, samples=_stats_samples, error_samples=_stats_errors,
        doc="per-channel mean and biased variance of x [N, C, *] (over every dim but 1)", **fl))
    registry.register(OpSchema(
        "batch_norm", ("x", "weight", "bias", "mean", "var"), _batch_norm_shape, autocast="float32",
        attrs={"eps": 1e-5, "training": False}, contiguous=("x", "weight", "bias", "mean", "var"),
        differentiable=("x", "weight", "bias"), reference=batch_norm_reference, samples=_batch_norm_samples,
        error_samples=_batch_norm_errors,
        doc="(x - mean) / sqrt(var + eps) * weight + bias per channel of x [N, C, *]; training=True means mean/var "
            "are batch_norm_stats(x) and gradients flow through them", **fl))
    registry.register(OpSchema(
        "batch_norm_backward", ("grad", "x", "weight", "mean", "var"), _batch_norm_backward_shape,
        attrs={"eps": 1e-5, "training": False}, contiguous=("grad", "x", "weight", "mean", "var"), num_outputs=3,
        dtype=_thrice, reference=batch_norm_backward_reference, samples=_batch_norm_backward_samples,
        error_samples=_backward_errors("batch_norm_backward", with_bias_stats=True),
        doc="gradients (x, weight, bias) of batch_norm, using the given statistics", **fl))

"""Neural-network ops: counter-based dropout (a kernel) and the losses and attention that the core builds
from other ops (composites: registered here so that every backend's conformance run checks them).

Dropout's mask is a pure function of (seed, offset, element index), so a seed gives the same mask on
every backend and the backward pass recomputes it instead of storing it:

    mix32(h):  h ^= h >> 16; h *= 0x21F0AAAD; h ^= h >> 15; h *= 0x735A2D97; h ^= h >> 15   (uint32 wrap)
    key      = mix32(seed ^ 0x9E3779B9)
    bits(i)  = mix32(mix32((offset + i) mod 2^32 ^ key) + key)         i: row-major element index
    keep(i)  = bits(i) >= threshold,   threshold = min(floor(p * 2^32), 2^32 - 1)
    out(i)   = keep(i) ? x(i) * (1 / (1 - p)) : 0

seed and offset are integers in [0, 2^32); 0 <= p < 1 (the core handles p = 0 and p = 1 itself).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES, DType
from ..errors import DTypeError, ShapeError
from ..schema import OpRegistry, OpSchema, Sample, Shape
from ._common import UNARY_SHAPES

MASK32 = 0xFFFFFFFF



# float16 composites: each kernel in the chain rounds its result to float16 (11-bit significand)
F16_CHAIN = {"float16": (5e-3, 1e-3), "bfloat16": (4e-2, 8e-3)}
F16_CHAIN_REASON = ("float16: a composite whose every intermediate is rounded to float16, so errors of a few "
                    "1e-4 accumulate along the chain (bfloat16: 8x, its rounding being 8x coarser)")

def mix32(h: np.ndarray) -> np.ndarray:
    """The 32-bit finalizer of the dropout hash, on uint64 arrays holding uint32 values."""
    h = h & MASK32
    h = h ^ (h >> 16)
    h = (h * 0x21F0AAAD) & MASK32
    h = h ^ (h >> 15)
    h = (h * 0x735A2D97) & MASK32
    return h ^ (h >> 15)


def dropout_keep(numel: int, p: float, seed: int, offset: int) -> np.ndarray:
    """The keep mask (flat, row-major) that every backend's dropout kernel must reproduce."""
    key = int(mix32(np.array([(seed ^ 0x9E3779B9) & MASK32], np.uint64))[0])
    counter = (np.arange(numel, dtype=np.uint64) + np.uint64(offset)) & np.uint64(MASK32)
    bits = mix32((mix32(counter ^ np.uint64(key)) + np.uint64(key)) & np.uint64(MASK32))
    threshold = min(int(math.floor(p * 2.0 ** 32)), MASK32)
    keep: np.ndarray = bits >= np.uint64(threshold)
    return keep


def check_dropout_attrs(op: str, p_name: str, attrs: Mapping[str, Any]) -> None:
    """The keep-mask attributes of a kernel that drops out (dropout_keep): the probability attrs[p_name] in
    [0, 1), seed and offset in [0, 2^32)."""
    p = float(attrs[p_name])
    if not 0.0 <= p < 1.0:
        raise ShapeError(f"{op}: the kernel takes 0 <= {p_name} < 1, got {p}")
    for name in ("seed", "offset"):
        if not 0 <= int(attrs[name]) <= MASK32:
            raise ShapeError(f"{op}: {name} must be in [0, 2^32), got {attrs[name]}")


def _dropout_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    check_dropout_attrs("dropout", "p", attrs)
    return [tuple(shapes[0])]


def _dropout_ref(x: np.ndarray, p: float = 0.5, seed: int = 0, offset: int = 0) -> Any:
    keep = dropout_keep(x.size, p, seed, offset).reshape(x.shape)
    return np.where(keep, x * (1.0 / (1.0 - p)), 0.0)


def _dropout_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for p, seed, offset in ((0.5, 0, 0), (0.1, 12345, 0), (0.9, 2 ** 32 - 1, 2 ** 32 - 7), (0.0, 7, 3)):
        for s in (*UNARY_SHAPES, (3, 129)):
            out.append(Sample([rng.uniform(-3, 3, s)], {"p": p, "seed": seed, "offset": offset},
                              name=f"{s}/p{p}/s{seed}/o{offset}"))
    return out


# ---- composite losses (the core's rumus.nn.functional) ------------------------------------------------

def _log_softmax(x: np.ndarray, axis: int) -> Any:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _reduce(loss: np.ndarray, reduction: str, denom: Any = None) -> Any:
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / (loss.size if denom is None else denom)


def _class_shapes(op: str, x: Shape, t: Shape) -> None:
    if len(x) == 0:
        raise ShapeError(f"{op}: input must have a class dimension, got a 0-d tensor")
    want = tuple(x[:1]) + tuple(x[2:]) if len(x) >= 2 else ()
    if tuple(t) != want:
        raise ShapeError(f"{op}: target shape {t} does not fit input shape {x} (expected {want})")


def _loss_out(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        x, t = shapes[0], shapes[1]
        if op in ("cross_entropy", "nll_loss"):
            _class_shapes(op, x, t)
            per = tuple(t)
        else:
            if tuple(x) != tuple(t):
                raise ShapeError(f"{op}: input shape {x} and target shape {t} differ")
            per = tuple(x)
        if attrs.get("reduction", "mean") not in ("mean", "sum", "none"):
            raise ShapeError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {attrs.get('reduction')!r}")
        return [per if attrs.get("reduction", "mean") == "none" else ()]
    return rule


def _class_target_dtype(op: str) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        if dtypes[1].name not in ("int64", "int32"):
            raise DTypeError(f"{op}: class-index targets must be int64 or int32, got {dtypes[1]}")
        return [dtypes[0]]
    return rule


def _nll_ref(logp: np.ndarray, target: np.ndarray, ignore_index: int = -100, reduction: str = "mean",
             label_smoothing: float = 0.0) -> Any:
    c = logp.shape[1] if logp.ndim >= 2 else logp.shape[0]
    lp = np.moveaxis(logp, 1, -1) if logp.ndim >= 2 else logp
    t = target.astype(np.int64)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.take_along_axis(lp, safe[..., None], axis=-1)[..., 0]
    loss = np.where(valid, -picked, 0.0)
    if label_smoothing:
        smooth = np.where(valid, -lp.sum(axis=-1), 0.0)
        loss = (1.0 - label_smoothing) * loss + label_smoothing / c * smooth
    return _reduce(loss, reduction, valid.sum())


def _cross_entropy_ref(x: np.ndarray, target: np.ndarray, ignore_index: int = -100, reduction: str = "mean",
                       label_smoothing: float = 0.0) -> Any:
    return _nll_ref(_log_softmax(x, 1 if x.ndim >= 2 else 0), target, ignore_index, reduction, label_smoothing)


def _class_samples(logits: bool) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out = []
        for shape in ((5, 3), (4, 7, 2), (6,), (1, 4)):
            c = shape[1] if len(shape) >= 2 else shape[0]
            tshape = (shape[0], *shape[2:]) if len(shape) >= 2 else ()
            x = rng.uniform(-3, 3, shape) if logits else _log_softmax(rng.uniform(-3, 3, shape), 1 if len(shape) > 1
                                                                           else 0)
            t = rng.integers(0, c, tshape)
            if t.size > 2:
                t.reshape(-1)[0] = -100
            attr_sets: list[dict[str, Any]] = [{"reduction": r} for r in ("mean", "sum", "none")]
            if logits:
                attr_sets.append({"reduction": "mean", "label_smoothing": 0.2})
                attr_sets.append({"reduction": "none", "label_smoothing": 0.1, "ignore_index": 1})
            for attrs in attr_sets:
                tt = np.where(t == -100, 1, t) if "ignore_index" in attrs else t  # -100 is a class there
                out.append(Sample([x, tt], attrs, name=f"{shape}{attrs}"))
        return out
    return gen


def _bce_logits_ref(x: np.ndarray, t: np.ndarray, reduction: str = "mean") -> Any:
    return _reduce((1 - t) * x + np.logaddexp(0.0, -x), reduction)


def _smooth_l1_ref(x: np.ndarray, t: np.ndarray, beta: float = 1.0, reduction: str = "mean") -> Any:
    d = np.abs(x - t)
    loss = d if beta == 0 else np.where(d < beta, 0.5 * d * d / max(beta, 1e-300), d - 0.5 * beta)
    return _reduce(loss, reduction)


def _pair_samples(kind: str) -> Any:
    def gen(rng: np.random.Generator) -> list[Sample]:
        out: list[Sample] = []
        for shape in ((4, 3), (), (7,), (2, 3, 5)):
            x = rng.uniform(-3, 3, shape)
            if kind == "bce":
                t = rng.uniform(0, 1, shape)
                attr_sets: list[dict[str, Any]] = [{"reduction": r} for r in ("mean", "sum", "none")]
            else:
                t = x + rng.uniform(0.1, 2.0, shape) * rng.choice([-1.0, 1.0], shape)  # |x - t| off the kinks
                attr_sets = [{"beta": b, "reduction": r} for b, r in ((1.0, "mean"), (0.5, "sum"), (3.0, "none"))]
            out.extend(Sample([x, t], a, name=f"{shape}{a}") for a in attr_sets)
        return out
    return gen


# ---- composite attention --------------------------------------------------------------------------------

def _sdpa_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    q, k, v = shapes
    if len(q) < 2 or len(k) < 2 or len(v) < 2:
        raise ShapeError(f"scaled_dot_product_attention: q, k, v need >= 2 dims, got {q}, {k}, {v}")
    if q[-1] != k[-1] or k[-2] != v[-2]:
        raise ShapeError(f"scaled_dot_product_attention: shapes q {q}, k {k}, v {v} do not fit "
                         f"(q and k share the last dim, k and v the sequence dim)")
    return [(*q[:-1], v[-1])]


def _sdpa_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, is_causal: bool = False,
              scale: float | None = None) -> Any:
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ np.swapaxes(k, -1, -2)) * s
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        scores = np.where(np.tril(np.ones((L, S), bool)), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def _sdpa_samples(rng: np.random.Generator) -> list[Sample]:
    out: list[Sample] = []
    for qs, ks, vs in (((3, 4), (5, 4), (5, 2)), ((2, 3, 4, 8), (2, 3, 4, 8), (2, 3, 4, 8)),
                       ((2, 6, 4), (2, 6, 4), (2, 6, 3)), ((1, 2, 5, 3), (1, 2, 7, 3), (1, 2, 7, 4))):
        for attrs in ({}, {"is_causal": True}, {"scale": 0.3}):
            out.append(Sample([rng.uniform(-1, 1, qs), rng.uniform(-1, 1, ks), rng.uniform(-1, 1, vs)], attrs,
                              name=f"{qs}/{ks}/{vs}{attrs}"))
    return out


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "dropout", ("x",), _dropout_shape, attrs={"p": 0.5, "seed": 0, "offset": 0}, dtypes=FLOAT_DTYPES,
        contiguous=("x",), volatile=("seed", "offset"),
        differentiable=("x",), reference=_dropout_ref, samples=_dropout_samples,
        doc="counter-based dropout: the keep mask is a hash of (seed, offset, row-major element index), "
            "see the module docstring; out = keep ? x / (1 - p) : 0. Linear in x: its backward is itself."))
    loss_kw: dict[str, Any] = {"composite": True, "dtypes": FLOAT_DTYPES, "differentiable": ("input",)}
    registry.register(OpSchema(
        "cross_entropy", ("input", "target"), _loss_out("cross_entropy"), autocast="float32",
        attrs={"ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0},
        dtype=_class_target_dtype("cross_entropy"), reference=_cross_entropy_ref, samples=_class_samples(True),
        doc="cross-entropy of logits [N, C, ...] (or [C]) with class-index targets (PyTorch's semantics, "
            "incl. ignore_index and label_smoothing; weights and probability targets in rumus.nn.functional)",
        **loss_kw))
    registry.register(OpSchema(
        "nll_loss", ("input", "target"), _loss_out("nll_loss"), attrs={"ignore_index": -100, "reduction": "mean"},
        autocast="float32",
        dtype=_class_target_dtype("nll_loss"), reference=_nll_ref, samples=_class_samples(False),
        doc="negative log-likelihood of log-probabilities [N, C, ...] with class-index targets", **loss_kw))
    registry.register(OpSchema(
        "binary_cross_entropy_with_logits", ("input", "target"), _loss_out("binary_cross_entropy_with_logits"),
        autocast="float32",
        attrs={"reduction": "mean"}, reference=_bce_logits_ref, samples=_pair_samples("bce"),
        tolerance=F16_CHAIN, tolerance_reason=F16_CHAIN_REASON,
        doc="(1 - t) * x + softplus(-x), reduced; pos_weight and weight live in rumus.nn.functional",
        **{**loss_kw, "differentiable": ("input", "target")}))
    registry.register(OpSchema(
        "smooth_l1_loss", ("input", "target"), _loss_out("smooth_l1_loss"), attrs={"beta": 1.0, "reduction": "mean"},
        autocast="float32",
        reference=_smooth_l1_ref, samples=_pair_samples("smooth_l1"),
        tolerance=F16_CHAIN, tolerance_reason=F16_CHAIN_REASON,
        doc="0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target), reduced",
        **{**loss_kw, "differentiable": ("input", "target")}))
    registry.register(OpSchema(
        "scaled_dot_product_attention", ("q", "k", "v"), _sdpa_shape, attrs={"is_causal": False, "scale": None},
        autocast="lower",
        composite=True, dtypes=FLOAT_DTYPES, differentiable=("q", "k", "v"), reference=_sdpa_ref,
        samples=_sdpa_samples, tolerance={"float32": (1e-5, 1e-5), **F16_CHAIN},
        tolerance_reason="two chained matmuls and a softmax: float32 rounding of sums over the head dim; "
                         + F16_CHAIN_REASON,
        doc="softmax(q k^T * scale [+ causal mask, top-left aligned]) v; masks and dropout in "
            "rumus.nn.functional.scaled_dot_product_attention"))

"""Fused cross-entropy over class-index targets: two row passes for forward and backward together, never a
dense one-hot or a stored log_softmax.

    cross_entropy_fwd(logits [M, C], target [M], weight [C] or 0-d)  -> (loss [M], lse [M])
    cross_entropy_bwd(grad [M], logits, target, weight, lse)          -> dlogits [M, C]
    cross_entropy_mean(logits [M, C], target [M], weight [C] or 0-d) -> (loss (), lse [M], total ())

With p = softmax(logits), lse the row logsumexp, w the class weights (all 1 when `weight` is 0-d: the
"no weights" placeholder, as flash_attention's masks), W = sum(w), s = label_smoothing and t the target:

    loss[i]      = (1 - s) w_t (lse - x_t) + (s / C) sum_c w_c (lse - x_c)      (0 where t == ignore_index)
    dlogits[i,c] = grad[i] ((1 - s) w_t (p_c - [c == t]) + (s / C) (W p_c - w_c))   (0 where ignored)

cross_entropy_mean is PyTorch's reduction="mean" in one op: total = the sum of w_t over the rows not ignored,
loss = sum(loss[i]) / total (NaN when every row is ignored, as 0 / 0); its backward is cross_entropy_bwd with
grad / total on every row. rumus.nn.functional.cross_entropy takes it for "mean", the per-row op otherwise
(a small batch feels each op the mean would take: a backend without the kernel runs the decomposition).
A target outside 0..C-1 that is not ignore_index raises IndexOutOfRange.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType
from ..errors import DTypeError, IndexOutOfRange, RumusError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape

ATTRS = {"ignore_index": -100, "label_smoothing": 0.0}
# (rows, classes): class counts around the vec4 width and one workgroup's reach (256 invocations)
CASES = ((3, 1), (4, 3), (5, 4), (3, 5), (2, 255), (2, 256), (3, 257), (2, 1000), (0, 4))


def _check(op: str, logits: Shape, target: Shape, weight: Shape, attrs: Mapping[str, Any]) -> tuple[int, int]:
    if len(logits) != 2:
        raise ShapeError(f"{op}: logits must be 2-D [rows, classes], got {tuple(logits)} (reshape [N, C, d...] "
                         f"to [N*d..., C] first, as rumus.nn.functional.cross_entropy does)")
    m, c = logits
    if c < 1:
        raise ShapeError(f"{op}: logits need at least one class, got shape {tuple(logits)}")
    if tuple(target) != (m,):
        raise ShapeError(f"{op}: target shape {tuple(target)} does not fit logits {tuple(logits)} (expected ({m},))")
    if tuple(weight) not in ((), (c,)):
        raise ShapeError(f"{op}: weight must have one entry per class, shape ({c},), or be 0-d for no weights; "
                         f"got {tuple(weight)}")
    if not 0.0 <= float(attrs.get("label_smoothing", 0.0)) <= 1.0:
        raise RumusError(f"{op}: label_smoothing must be in [0, 1], got {attrs['label_smoothing']}")
    return m, c


def _fwd_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    m, _ = _check("cross_entropy_fwd", shapes[0], shapes[1], shapes[2], attrs)
    return [(m,), (m,)]


def _mean_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    m, _ = _check("cross_entropy_mean", shapes[0], shapes[1], shapes[2], attrs)
    return [(), (m,), ()]


def _bwd_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    grad, logits, target, weight, lse = (tuple(s) for s in shapes)
    m, _ = _check("cross_entropy_bwd", logits, target, weight, attrs)
    if grad != (m,) or lse != (m,):
        raise ShapeError(f"cross_entropy_bwd: grad {grad} and lse {lse} must both be ({m},), one per row of "
                         f"logits {logits}")
    return [logits]


def _dtype_rule(op: str, logits_at: int, outputs: int) -> Any:
    def rule(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
        x, t = dtypes[logits_at], dtypes[logits_at + 1]
        if t.name not in ("int64", "int32"):
            raise DTypeError(f"{op}: class-index targets must be int64 or int32, got {t}")
        others = [d for i, d in enumerate(dtypes) if i not in (logits_at, logits_at + 1)]
        if any(d != x for d in others):
            raise DTypeError(f"{op}: weight, grad and lse must have the logits' dtype {x}, got "
                             f"{', '.join(str(d) for d in others)}")
        return [x] * outputs
    return rule


def _rows(logits: np.ndarray, target: np.ndarray, weight: np.ndarray, ignore_index: int,
          op: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lse, valid rows, safe targets, per-class weights) in float64."""
    c = logits.shape[1]
    t = np.asarray(target).astype(np.int64)
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= c))
    if bad.any():
        raise IndexOutOfRange(f"{op}: a target class index is out of range for {c} classes (valid targets are "
                              f"0..{c - 1}, or ignore_index={ignore_index}); got {int(t[bad][0])}")
    safe = np.where(valid, t, 0)
    m = logits.max(axis=1, keepdims=True) if logits.size else np.zeros((logits.shape[0], 1))
    shift = np.where(np.isfinite(m), m, 0.0)
    lse = (np.log(np.exp(logits - shift).sum(axis=1, keepdims=True)) + shift)[:, 0]
    w = np.asarray(weight, np.float64) if np.ndim(weight) else np.ones(c)  # 0-d: no weights
    return lse, valid, safe, w


def cross_entropy_fwd_reference(logits: np.ndarray, target: np.ndarray, weight: np.ndarray, ignore_index: int = -100,
                                label_smoothing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    lse, valid, safe, w = _rows(logits, target, weight, ignore_index, "cross_entropy_fwd")
    nlogp = lse[:, None] - logits
    rows = np.arange(logits.shape[0])
    loss = (1.0 - label_smoothing) * w[safe] * nlogp[rows, safe]
    if label_smoothing:
        loss = loss + label_smoothing / logits.shape[1] * (nlogp * w).sum(axis=1)
    return np.where(valid, loss, 0.0), lse


def cross_entropy_mean_reference(logits: np.ndarray, target: np.ndarray, weight: np.ndarray,
                                 ignore_index: int = -100, label_smoothing: float = 0.0) -> tuple[Any, ...]:
    loss, lse = cross_entropy_fwd_reference(logits, target, weight, ignore_index, label_smoothing)
    _, valid, safe, w = _rows(logits, target, weight, ignore_index, "cross_entropy_mean")
    total = np.where(valid, w[safe], 0.0).sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.float64(loss.sum()) / np.float64(total)
    return np.asarray(mean), lse, np.asarray(total)


def cross_entropy_bwd_reference(grad: np.ndarray, logits: np.ndarray, target: np.ndarray, weight: np.ndarray,
                                lse: np.ndarray, ignore_index: int = -100, label_smoothing: float = 0.0) -> Any:
    _, valid, safe, w = _rows(logits, target, weight, ignore_index, "cross_entropy_bwd")
    c = logits.shape[1]
    p = np.exp(logits - lse[:, None])
    onehot = np.arange(c)[None, :] == safe[:, None]
    d = (1.0 - label_smoothing) * w[safe][:, None] * (p - onehot)
    d = d + label_smoothing / c * (w.sum() * p - w[None, :])
    return np.where(valid[:, None], d * grad[:, None], 0.0)


def _attr_sets(m: int, c: int) -> list[dict[str, Any]]:
    sets: list[dict[str, Any]] = [{}, {"label_smoothing": 0.1}]
    if c > 1:
        sets.append({"ignore_index": 1, "label_smoothing": 0.25})
    return sets


def _inputs(rng: np.random.Generator, m: int, c: int, attrs: Mapping[str, Any], weighted: bool) -> list[Any]:
    x = rng.uniform(-4, 4, (m, c))
    t = rng.integers(0, c, m)
    if m > 2:
        t[0] = attrs.get("ignore_index", -100)  # one ignored row
    w = rng.uniform(0.2, 2.0, c) if weighted else np.zeros(())
    return [x, t, w]


def _fwd_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for m, c in CASES:
        for attrs in _attr_sets(m, c):
            for weighted in (False, True):
                out.append(Sample(_inputs(rng, m, c, attrs, weighted), attrs, grad=False,
                                  name=f"({m},{c}){attrs}{'/w' if weighted else ''}"))
    return out


def _mean_samples(rng: np.random.Generator) -> list[Sample]:
    x, t, w = _inputs(rng, 3, 4, {}, False)
    return [*_fwd_samples(rng), Sample([x, np.full(3, -100), w], {}, grad=False, name="(3,4) every row ignored: NaN")]


def _bwd_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for m, c in CASES:
        for attrs in _attr_sets(m, c):
            for weighted in (False, True):
                x, t, w = _inputs(rng, m, c, attrs, weighted)
                _, lse = cross_entropy_fwd_reference(x, t, w, **attrs)
                out.append(Sample([rng.uniform(-1, 1, m), x, t, w, lse], attrs, grad=False,
                                  name=f"({m},{c}){attrs}{'/w' if weighted else ''}"))
    return out


def _errors() -> list[ErrorSample]:
    x, t = np.zeros((2, 3)), np.zeros(2, np.int64)
    return [ErrorSample([np.zeros(3), np.zeros(3, np.int64), np.zeros(())], {}, ShapeError, "2-D"),
            ErrorSample([x, np.zeros(3, np.int64), np.zeros(())], {}, ShapeError, "does not fit"),
            ErrorSample([x, t, np.zeros(4)], {}, ShapeError, "one entry per class"),
            ErrorSample([x, np.zeros(2), np.zeros(())], {}, DTypeError, "int64 or int32"),
            ErrorSample([x, t, np.zeros(())], {"label_smoothing": 1.5}, RumusError, "label_smoothing")]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "cross_entropy_fwd", ("logits", "target", "weight"), _fwd_shape, attrs=ATTRS, num_outputs=2,
        dtype=_dtype_rule("cross_entropy_fwd", 0, 2), contiguous=("logits", "target", "weight"),
        differentiable=("logits",),
        autocast="float32", reference=cross_entropy_fwd_reference, samples=_fwd_samples,
        error_samples=_errors,
        doc="per-row cross-entropy loss and row logsumexp of logits [M, C] at class indices (ignore_index, "
            "label_smoothing, class weights; see rumus_contracts.ops.cross_entropy)"))
    registry.register(OpSchema(
        "cross_entropy_mean", ("logits", "target", "weight"), _mean_shape, attrs=ATTRS, num_outputs=3,
        dtype=_dtype_rule("cross_entropy_mean", 0, 3), contiguous=("logits", "target", "weight"),
        differentiable=("logits",),
        autocast="float32", reference=cross_entropy_mean_reference, samples=_mean_samples,
        error_samples=_errors,
        doc="cross_entropy_fwd's loss reduced as PyTorch's reduction='mean' (divided by the sum of the target "
            "weights of the rows not ignored), the row logsumexp and that sum, in one op"))
    registry.register(OpSchema(
        "cross_entropy_bwd", ("grad", "logits", "target", "weight", "lse"), _bwd_shape, attrs=ATTRS,
        dtype=_dtype_rule("cross_entropy_bwd", 1, 1), dispatch_on=1,
        contiguous=("grad", "logits", "target", "weight", "lse"), autocast="float32",
        reference=cross_entropy_bwd_reference, samples=_bwd_samples,
        doc="d(logits) of cross_entropy_fwd's loss from the saved lse, in one pass per row (no one-hot)"))

"""Losses built from core ops (rumus.nn.functional; PyTorch's signatures and reductions).

cross_entropy with class-index targets runs the fused cross_entropy_fwd op (per-row loss and logsumexp
in one row pass; its backward writes d(logits) in one more, rumus_contracts.ops.cross_entropy) where the
backend has its kernels, and reduces the per-row losses here. Elsewhere, and for probability targets,
it is log_softmax (one fused kernel) + a gather of the target column, differentiated through those ops'
formulas. The class-index forms are also registered as composite ops (`rumus.ops.cross_entropy`, ...),
so every backend's conformance run checks them against numpy.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import DTypeError, IndexOutOfRange, RumusError, ShapeError

from .. import _dispatch
from .. import _math as M
from .. import _views
from .._dispatch import COMPOSITES, scalar_tensor
from ..autograd.kernel_lookup import has_kernel
from ..ops import get as _op
from .._indexing import gather, index_select
from ..tensor import Tensor
from ._functional_act import softplus

# rumus.nn.functional star-imports these.
__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss", "nll_loss",
    "reduce_loss", "smooth_l1_loss",
]


def reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    """Apply a loss's `reduction` ("mean", "sum" or "none") to its per-element values."""
    if reduction == "mean":
        return M.mean(loss)
    if reduction == "sum":
        return M.sum(loss)
    if reduction == "none":
        return loss
    raise RumusError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _legacy(size_average: Any, reduce: Any, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _class_last(input: Tensor) -> tuple[Tensor, int]:
    """[N, C, d1...] -> ([N*d1*..., C], C); [C] -> ([1, C], C)."""
    if input.ndim == 0:
        raise ShapeError("cross_entropy/nll_loss: input must have a class dimension, got a 0-d tensor")
    if input.ndim == 1:
        return _views.unsqueeze(input, 0), input.shape[0]
    c = input.shape[1]
    if input.ndim == 2:
        return input, c
    return _views.permute(input, (0, *range(2, input.ndim), 1)).reshape(-1, c), c


def _check_target(op: str, input: Tensor, target: Tensor) -> None:
    want = (input.shape[0], *input.shape[2:]) if input.ndim >= 2 else ()
    if target.shape != want:
        raise ShapeError(f"{op}: target shape {target.shape} does not fit input shape {input.shape} "
                         f"(expected {want} for class indices)")
    if target.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"{op}: class-index targets must be int64 or int32, got {target.dtype} (for class "
                         f"probabilities pass a float target of the input's shape)")


def _nll(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
         label_smoothing: float, out_shape: tuple[int, ...], op: str = "cross_entropy") -> Tensor:
    """logp [M, C], target [M] class indices -> the reduced loss (or out_shape per-element losses)."""
    c = logp.shape[1]
    t = target.reshape(-1)
    valid = M.ne(t, ignore_index)
    safe = M.where(valid, t, 0)
    try:
        picked = _views.squeeze(gather(logp, 1, _views.unsqueeze(safe, 1)), 1)
    except IndexOutOfRange as exc:  # name the loss and the class count, not the gather inside it
        raise IndexOutOfRange(f"{op}: a target class index is out of range for {c} classes (valid targets are "
                              f"0..{c - 1}, or ignore_index={ignore_index}); {exc}") from None
    mask = valid.to(logp.dtype)
    w = M.mul(index_select(weight, 0, safe), mask) if weight is not None else mask
    loss = M.mul(M.neg(picked), w)
    if label_smoothing:
        weighted = M.mul(logp, weight) if weight is not None else logp
        smooth = M.mul(M.neg(M.sum(weighted, 1)), mask)
        loss = M.add(M.mul(loss, 1.0 - label_smoothing), M.mul(smooth, label_smoothing / c))
    if reduction == "none":
        return loss.reshape(out_shape)
    if reduction == "sum":
        return M.sum(loss)
    if reduction == "mean":
        return M.div(M.sum(loss), M.sum(w))
    raise RumusError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities [N, C, ...] (or [C]) at class-index targets."""
    _check_target("nll_loss", input, target)
    logp, _ = _class_last(input)
    return _nll(logp, target, weight, ignore_index, _legacy(size_average, reduce, reduction), 0.0, target.shape,
                "nll_loss")


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits [N, C, ...] (or [C]) with class indices (int) or class probabilities (float,
    the input's shape); weight, ignore_index and label_smoothing as in PyTorch."""
    reduction = _legacy(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RumusError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    logits, c = _class_last(input)
    if target.dtype.is_floating:
        return _soft_cross_entropy(input, M.log_softmax(logits, 1), target, weight, reduction, label_smoothing, c)
    _check_target("cross_entropy", input, target)
    if _fused_applies(logits, weight):
        return _fused_cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing, target.shape)
    return _nll(M.log_softmax(logits, 1), target, weight, ignore_index, reduction, label_smoothing, target.shape)


def _fused_applies(logits: Tensor, weight: Tensor | None) -> bool:
    """The fused op runs where the backend has both kernels, the weights (no gradient taken, as in
    PyTorch) match the logits, and no ONNX trace is recording (ONNX has no such node)."""
    if weight is not None and (weight.dtype != logits.dtype or weight.device != logits.device or weight.ndim != 1):
        return False
    tracer = _dispatch._tracer
    if tracer is not None and tracer.here():
        return False
    return has_kernel("cross_entropy_fwd", logits) and has_kernel("cross_entropy_bwd", logits)


def _fused_cross_entropy(logits: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
                         label_smoothing: float, out_shape: tuple[int, ...]) -> Tensor:
    t = target if target.ndim == 1 else target.reshape(-1)  # a view costs microseconds: small batches feel it
    w = weight if weight is not None else scalar_tensor(0.0, logits.dtype, logits.device)  # 0-d: no weights
    if reduction == "mean":  # PyTorch's: divided by the sum of w_t over the rows not ignored (0 / 0 = NaN), one op
        mean, _, _ = _op("cross_entropy_mean").multi(logits, t, w, ignore_index=int(ignore_index),
                                                     label_smoothing=float(label_smoothing))
        return mean
    loss, _ = _op("cross_entropy_fwd").multi(logits, t, w, ignore_index=int(ignore_index),
                                             label_smoothing=float(label_smoothing))
    if reduction == "none":
        return loss.reshape(out_shape)
    if reduction == "sum":
        return M.sum(loss)
    raise RumusError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _soft_cross_entropy(input: Tensor, logp: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        label_smoothing: float, c: int) -> Tensor:
    if target.shape != input.shape:
        index_shape = input.shape[:1] + input.shape[2:] if input.ndim > 1 else ()
        hint = ""
        if target.shape == index_shape:  # the shape of class indices, held as floats
            hint = (f"; a {target.dtype} target of shape {target.shape} looks like class indices stored as floats: "
                    f"pass them as integers (target.long()). .rrec files written before integer dtype tags "
                    f"hold integer labels as float32: rewrite them with RecordWriter, which keeps int64 now")
        raise ShapeError(f"cross_entropy: probability targets need the input's shape {input.shape}, got "
                         f"{target.shape}{hint}")
    t, _ = _class_last(target)
    if label_smoothing:
        t = M.add(M.mul(t, 1.0 - label_smoothing), label_smoothing / c)
    prod = M.mul(logp, t)
    if weight is not None:
        prod = M.mul(prod, weight)
    loss = M.neg(M.sum(prod, 1))
    if reduction == "none":
        shape = (input.shape[0], *input.shape[2:]) if input.ndim >= 2 else ()
        return loss.reshape(shape)
    return reduce_loss(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x): stable for large |x|."""
    if input.shape != target.shape:
        raise ShapeError(f"binary_cross_entropy_with_logits: target shape {target.shape} differs from input "
                         f"shape {input.shape}")
    sp = softplus(M.neg(input))
    if pos_weight is not None:
        sp = M.mul(sp, M.add(M.mul(M.sub(pos_weight, 1.0), target), 1.0))
    loss = M.add(M.mul(M.sub(1.0, target), input), sp)
    if weight is not None:
        loss = M.mul(loss, weight)
    return reduce_loss(loss, _legacy(size_average, reduce, reduction))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Tensor:
    """-(t log x + (1 - t) log(1 - x)) on probabilities, logs clamped at -100 like PyTorch."""
    if input.shape != target.shape:
        raise ShapeError(f"binary_cross_entropy: target shape {target.shape} differs from input shape {input.shape}")
    log_x = M.clamp(M.log(input), min=-100.0)
    log_1mx = M.clamp(M.log(M.sub(1.0, input)), min=-100.0)
    loss = M.neg(M.add(M.mul(target, log_x), M.mul(M.sub(1.0, target), log_1mx)))
    if weight is not None:
        loss = M.mul(loss, weight)
    return reduce_loss(loss, _legacy(size_average, reduce, reduction))


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta = 0 is the L1 loss."""
    if input.shape != target.shape:
        raise ShapeError(f"smooth_l1_loss: target shape {target.shape} differs from input shape {input.shape}")
    if beta < 0:
        raise RumusError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = M.sub(input, target)
    ad = M.abs(d)
    if beta == 0:
        loss = ad
    else:
        loss = M.where(M.lt(ad, beta), M.mul(M.mul(d, d), 0.5 / beta), M.sub(ad, 0.5 * beta))
    return reduce_loss(loss, _legacy(size_average, reduce, reduction))


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    if input.shape != target.shape:
        raise ShapeError(f"huber_loss: target shape {target.shape} differs from input shape {input.shape}")
    d = M.sub(input, target)
    ad = M.abs(d)
    loss = M.where(M.lt(ad, delta), M.mul(M.mul(d, d), 0.5), M.mul(M.sub(ad, 0.5 * delta), delta))
    return reduce_loss(loss, reduction)


COMPOSITES.update({
    "cross_entropy": lambda input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0: cross_entropy(
        input, target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing),
    "nll_loss": lambda input, target, ignore_index=-100, reduction="mean": nll_loss(
        input, target, ignore_index=ignore_index, reduction=reduction),
    "binary_cross_entropy_with_logits": lambda input, target, reduction="mean": binary_cross_entropy_with_logits(
        input, target, reduction=reduction),
    "smooth_l1_loss": lambda input, target, beta=1.0, reduction="mean": smooth_l1_loss(
        input, target, reduction=reduction, beta=beta),
})

"""The fused cross-entropy pair from row reductions, gather and elementwise ops (the formulas in
rumus_contracts.ops.cross_entropy). A target class out of range raises IndexOutOfRange as the kernels do;
telling needs one host read of a flag, on this fallback path only."""

from __future__ import annotations

from rumus_contracts import IndexOutOfRange, float32, int64

from .. import _math as M
from .._tensor_base import Tensor
from . import register
from ._helpers import arange_like, in_float32, op, total


def _rows(op_name: str, logits: Tensor, target: Tensor, weight: Tensor,
          ignore_index: int) -> tuple[Tensor, Tensor, Tensor]:
    """(valid rows [M, 1] bool, safe targets [M, 1] int64, per-class weights [C])."""
    c = logits.shape[1]
    t = target if target.dtype == int64 else M.cast(target, int64)
    valid = M.ne(t, ignore_index)
    bad = M.logical_and(valid, M.logical_or(M.lt(t, 0), M.ge(t, c)))
    if t.numel() and total(M.cast(bad, float32)).item() > 0:
        got = [int(v) for v in t.numpy() if v != ignore_index and not 0 <= v < c]
        raise IndexOutOfRange(f"{op_name}: a target class index is out of range for {c} classes (valid targets "
                              f"are 0..{c - 1}, or ignore_index={ignore_index}); got {got[0]}")
    safe = M.where(valid, t, 0).reshape((-1, 1))
    w = weight if weight.ndim else op("fill")(shape=(c,), value=1.0, dtype=logits.dtype.name, device=str(logits.device))
    return valid.reshape((-1, 1)), safe, w


def _lse(logits: Tensor) -> Tensor:
    """Row logsumexp [M, 1], shifted by the row max where it is finite."""
    m = op("amax")(logits, dims=(1,)).detach()
    shift = M.where(M.isfinite(m), m, 0.0)
    return M.add(M.log(op("sum")(M.exp(M.sub(logits, shift)), dims=(1,))), shift)


@register("cross_entropy_fwd", grad="formula")
@in_float32
def cross_entropy_fwd(logits: Tensor, target: Tensor, weight: Tensor, *, ignore_index: int,
                      label_smoothing: float) -> tuple[Tensor, Tensor]:
    valid, safe, w = _rows("cross_entropy_fwd", logits, target, weight, ignore_index)
    c = logits.shape[1]
    lse = _lse(logits)
    nlogp = M.sub(lse, logits)
    w_t = op("gather")(w, safe.reshape((-1,)), dim=0).reshape((-1, 1))
    loss = M.mul(M.mul(w_t, op("gather")(nlogp, safe, dim=1)), 1.0 - label_smoothing)
    if label_smoothing:
        loss = M.add(loss, M.mul(op("sum")(M.mul(nlogp, w), dims=(1,)), label_smoothing / c))
    return M.where(valid, loss, 0.0).reshape((-1,)), lse.reshape((-1,))


@register("cross_entropy_bwd")
@in_float32
def cross_entropy_bwd(grad: Tensor, logits: Tensor, target: Tensor, weight: Tensor, lse: Tensor, *,
                      ignore_index: int, label_smoothing: float) -> Tensor:
    valid, safe, w = _rows("cross_entropy_bwd", logits, target, weight, ignore_index)
    c = logits.shape[1]
    p = M.exp(M.sub(logits, lse.reshape((-1, 1))))
    onehot = M.cast(M.eq(arange_like(c, logits, int64).reshape((1, c)), safe), logits.dtype)
    w_t = op("gather")(w, safe.reshape((-1,)), dim=0).reshape((-1, 1))
    d = M.mul(M.mul(w_t, M.sub(p, onehot)), 1.0 - label_smoothing)
    if label_smoothing:
        d = M.add(d, M.mul(M.sub(M.mul(p, op("sum")(w, dims=(0,))), w), label_smoothing / c))
    return M.where(valid, M.mul(d, grad.reshape((-1, 1))), 0.0)


@register("cross_entropy_mean", grad="formula")
def cross_entropy_mean(logits: Tensor, target: Tensor, weight: Tensor, *, ignore_index: int,
                       label_smoothing: float) -> tuple[Tensor, Tensor, Tensor]:
    loss, lse = op("cross_entropy_fwd").multi(logits, target, weight, ignore_index=ignore_index,
                                              label_smoothing=label_smoothing)
    t = target if target.dtype == int64 else M.cast(target, int64)
    valid = M.ne(t, ignore_index)
    if weight.ndim:
        w_t = M.where(valid, op("gather")(weight, M.where(valid, t, 0), dim=0), 0.0)
    else:
        w_t = M.cast(valid, logits.dtype)
    total_w = op("sum")(w_t, dims=(0,)).reshape(())
    return M.div(op("sum")(loss, dims=(0,)).reshape(()), total_w), lse, total_w

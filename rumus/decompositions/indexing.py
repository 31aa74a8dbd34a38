"""index_select / index_add from gather / scatter_add (the 1-D index broadcast along the other dims),
embedding and its backward from those, and dropout (its keep mask is the contract's counter-based hash,
computed on the host and uploaded: the hash needs 32-bit xor and shifts, which the elementwise table
does not have)."""

from __future__ import annotations

from rumus_contracts import bool_, int64
from rumus_contracts.ops.nn import dropout_keep

from .. import _math as M
from .._creation import from_host
from .._tensor_base import Tensor
from . import register
from ._helpers import arange_like, in_float32, names_index_errors, op


def _along(index: Tensor, dim: int, shape: tuple[int, ...]) -> Tensor:
    """A 0-D or 1-D index as a gather/scatter index of `shape`: its entries along dim, repeated elsewhere."""
    flat = index.reshape((-1,))
    view = [1] * len(shape)
    view[dim] = flat.shape[0]
    return flat.reshape(tuple(view)).expand(shape)


def _select(x: Tensor, index: Tensor, dim: int) -> Tensor:
    d = dim % x.ndim
    n = index.numel()
    shape = (*x.shape[:d], n, *x.shape[d + 1:])
    return op("gather")(x, _along(index, d, shape), dim=d)


def _add_at(x: Tensor, index: Tensor, source: Tensor, dim: int, alpha: float) -> Tensor:
    d = dim % x.ndim
    src = source if alpha == 1.0 else M.mul(source, alpha)
    return op("scatter_add")(x, _along(index, d, tuple(source.shape)), src, dim=d)


@register("index_select")
@names_index_errors("index_select")
def index_select(x: Tensor, index: Tensor, *, dim: int) -> Tensor:
    return _select(x, index, dim)


@register("index_add")
@names_index_errors("index_add")
@in_float32
def index_add(x: Tensor, index: Tensor, source: Tensor, *, dim: int, alpha: float) -> Tensor:
    return _add_at(x, index, source, dim, alpha)


@register("embedding", grad="formula")
@names_index_errors("embedding")
def embedding(weight: Tensor, indices: Tensor, *, padding_idx: int | None) -> Tensor:
    rows = _select(weight, indices.reshape((-1,)), 0)
    return rows.reshape((*indices.shape, weight.shape[1]))


@register("embedding_backward")
@names_index_errors("embedding_backward")
@in_float32
def embedding_backward(grad: Tensor, indices: Tensor, *, num_weights: int, padding_idx: int | None) -> Tensor:
    dim = grad.shape[-1]
    zeros = op("fill")(shape=(num_weights, dim), value=0.0, dtype=grad.dtype.name, device=str(grad.device))
    out = _add_at(zeros, indices.reshape((-1,)), grad.reshape((-1, dim)), 0, 1.0)
    if padding_idx is not None and num_weights:
        pad = padding_idx % num_weights
        row = M.eq(arange_like(num_weights, grad, int64).reshape((num_weights, 1)), pad)
        out = M.where(row, M.mul(out, 0.0), out)
    return out


@register("dropout", grad="formula")
def dropout(x: Tensor, *, p: float, seed: int, offset: int) -> Tensor:
    keep = from_host(dropout_keep(x.numel(), p, seed, offset).reshape(x.shape), bool_, x._storage.device)
    return M.where(keep, M.mul(x, 1.0 / (1.0 - p)), 0.0)

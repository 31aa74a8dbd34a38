"""Integer indexing with PyTorch's signatures: index_select, index_add, gather, scatter_add, one_hot.

They run the `index_select` / `index_add` / `gather` / `scatter_add` ops (dim normalized here, so
kernels see non-negative dims); each is also a Tensor method (x.gather(dim, index), ...).
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import DTypeError, RumusError, int64
from rumus_contracts.shapes import normalize_dim

from . import _math
from . import _views
from .ops import get as _op
from ._tensor_base import Tensor


def _index(index: Any, like: Tensor, op: str) -> Tensor:
    if isinstance(index, Tensor):
        if index.dtype.name not in ("int64", "int32"):
            raise DTypeError(f"{op}: the index must be an int64 or int32 tensor, got {index.dtype}; use .long()")
        return index
    from ._creation import tensor
    return tensor(index, dtype=int64, device=like.device)


def index_select(x: Tensor, dim: int, index: Any) -> Tensor:
    """x's slices along dim at the positions in a 1-D (or 0-D) integer index."""
    idx = _index(index, x, "index_select")
    return _op("index_select")(x, idx, dim=normalize_dim("index_select", dim, x.ndim))


def index_add(x: Tensor, dim: int, index: Any, source: Tensor, alpha: float = 1.0) -> Tensor:
    """Out-of-place x.index_add(dim, index, source, alpha=alpha): repeated indices add up."""
    idx = _index(index, x, "index_add")
    return _op("index_add")(x, idx, source, dim=normalize_dim("index_add", dim, x.ndim), alpha=float(alpha))


def gather(x: Tensor, dim: int, index: Any) -> Tensor:
    """out[i][j][k] = x[i][index[i][j][k]][k] for dim=1 (index has x's number of dims)."""
    idx = _index(index, x, "gather")
    return _op("gather")(x, idx, dim=normalize_dim("gather", dim, x.ndim))


def take_along_dim(x: Tensor, indices: Tensor, dim: int) -> Tensor:
    return gather(x, dim, indices)


def scatter_add(x: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
    """Out-of-place x.scatter_add(dim, index, src): src[i][j][k] added at [i][index[i][j][k]][k] (dim=1)."""
    idx = _index(index, x, "scatter_add")
    return _op("scatter_add")(x, idx, src, dim=normalize_dim("scatter_add", dim, x.ndim))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with a new last dim (PyTorch's torch.nn.functional.one_hot)."""
    if tensor.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"one_hot: needs an integer class-index tensor, got {tensor.dtype}")
    if num_classes < 0:
        if tensor.numel() == 0:
            raise RumusError("one_hot: cannot infer num_classes from an empty tensor; pass num_classes")
        num_classes = int(_math.amax(tensor).item()) + 1
    from ._creation import arange
    classes = arange(num_classes, dtype=tensor.dtype, device=tensor.device)
    return _math.eq(_views.unsqueeze(tensor, -1), classes).to(int64)


_math.METHODS.update({
    "index_select": index_select, "index_add": index_add, "gather": gather, "scatter_add": scatter_add,
    "take_along_dim": take_along_dim,
})

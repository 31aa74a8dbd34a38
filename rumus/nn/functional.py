"""Stateless functions behind the nn layers (rumus.nn.functional, like torch.nn.functional)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import ShapeError

from .. import _math as M
from ..tensor import Tensor
from ..amp.policy import follow as _follow
from ..amp.policy import for_op as _autocast_for_op
from ._functional_loss import reduce_loss


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if weight.ndim == 2 and (x.ndim == 0 or x.shape[-1] != weight.shape[1]):  # name the layer, not the GEMM inside
        raise ShapeError(f"linear: input of shape {x.shape} has {x.shape[-1] if x.ndim else 0} features, but the "
                         f"weight {weight.shape} expects in_features={weight.shape[-1]}")
    # weight.mT is a free view; the GEMM kernels take transposed operands without copying
    x, weight = _autocast_for_op("matmul", x, weight)  # the parameter itself is cast (and cached), not its view
    out = M.matmul(x, weight.mT)
    return M.add(out, _follow(bias, out)) if bias is not None else out  # autocast: bias in out's dtype


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    return M.relu(x)


def sigmoid(x: Tensor) -> Tensor:
    return M.sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    return M.tanh(x)


def softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    return M.softmax(x, dim, dtype)


def log_softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    return M.log_softmax(x, dim, dtype)


def _check_same(op: str, input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        raise ShapeError(f"{op}: input shape {input.shape} and target shape {target.shape} differ; "
                         f"reshape the target (e.g. target.view({', '.join(map(str, input.shape))}))")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check_same("mse_loss", input, target)
    d = M.sub(input, target)
    return reduce_loss(M.mul(d, d), reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check_same("l1_loss", input, target)
    return reduce_loss(M.abs(M.sub(input, target)), reduction)
from ._functional_ext import *  # noqa: E402, F401, F403  (activations, dropout, embedding, losses, attention)
from .functional_conv import *  # noqa: E402, F401, F403  (conv, pooling)
from .functional_norm import *  # noqa: E402, F401, F403  (normalization)
from .functional_dropout import *  # noqa: E402, F401, F403  (channel dropout: dropout1d/2d/3d)
from .functional_torch import *  # noqa: E402, F401, F403  (pad, interpolate, normalize, cosine_similarity, kl_div)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:  # type: ignore[no-redef]  # checked
    """int64 one-hot encoding with a new last dim; class ids outside 0..num_classes-1 are refused (as
    PyTorch does) rather than encoded as rows of zeros."""
    from rumus_contracts import ArgumentTypeError, IndexOutOfRange

    from .._indexing import one_hot as _one_hot
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise ArgumentTypeError(f"one_hot: num_classes must be an int, got {type(num_classes).__name__}")
    if tensor.dtype.name in ("int64", "int32") and tensor.numel():
        lo, hi = int(M.amin(tensor).item()), int(M.amax(tensor).item())
        if lo < 0:
            raise IndexOutOfRange(f"one_hot: class values must be non-negative, found {lo}")
        if num_classes >= 0 and hi >= num_classes:
            raise IndexOutOfRange(f"one_hot: class value {hi} is out of range for num_classes={num_classes} "
                                  f"(valid classes are 0..{num_classes - 1})")
    elif num_classes < -1:
        raise IndexOutOfRange(f"one_hot: num_classes must be -1 (infer) or >= 0, got {num_classes}")
    return _one_hot(tensor, num_classes)

"""Stateless functions behind the nn layers (rumus.nn.functional, like torch.nn.functional): the few that
are one core op each are defined here; each other family lives in a file of its own and is imported by name
(the names are the public API: tests/nn/test_public_names.py)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import ShapeError

from .. import _math as M
from .._indexing import gather, index_add, index_select, scatter_add
from ..amp.policy import follow as _follow
from ..amp.policy import for_op as _autocast_for_op
from ..tensor import Tensor
from ._functional_act import (
    celu, dropout, elu, embedding, erf, gelu, hardsigmoid, hardswish, hardtanh, leaky_relu, logsigmoid, mish, relu6,
    selu, silu, softplus, softsign, tanhshrink,
)
from ._functional_attention import causal_mask, generate_square_subsequent_mask, scaled_dot_product_attention
from ._functional_loss import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, nll_loss, reduce_loss,
    smooth_l1_loss,
)
from .functional_conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, conv_transpose2d, max_pool2d
from .functional_dropout import dropout1d, dropout2d, dropout3d
from .functional_norm import batch_norm, group_norm, layer_norm, rms_norm
from .functional_torch import cosine_similarity, interpolate, kl_div, normalize, pad, pairwise_distance, upsample


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


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
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


__all__ = [
    # defined here
    "l1_loss", "linear", "log_softmax", "mse_loss", "one_hot", "relu", "sigmoid", "softmax", "tanh",
    # activations, dropout, embedding (_functional_act)
    "celu", "dropout", "elu", "embedding", "erf", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "logsigmoid", "mish", "relu6", "selu", "silu", "softplus", "softsign", "tanhshrink",
    # attention (_functional_attention)
    "causal_mask", "generate_square_subsequent_mask", "scaled_dot_product_attention",
    # losses (_functional_loss)
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss", "nll_loss",
    "reduce_loss", "smooth_l1_loss",
    # integer indexing (core)
    "gather", "index_add", "index_select", "scatter_add",
    # conv and pooling, normalization, channel dropout, PyTorch extras (functional_*.py)
    "adaptive_avg_pool2d", "avg_pool2d", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d",
    "batch_norm", "group_norm", "layer_norm", "rms_norm", "dropout1d", "dropout2d", "dropout3d",
    "cosine_similarity", "interpolate", "kl_div", "normalize", "pad", "pairwise_distance", "upsample",
]

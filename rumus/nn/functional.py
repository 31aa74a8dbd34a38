"""Stateless functions behind the nn layers (rumus.nn.functional, like torch.nn.functional): the few that
are one core op each are defined here; each other family lives in a file of its own whose __all__ lists its
public names (tests/nn/test_public_names.py checks they all arrive here and nothing private does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rumus_contracts import ShapeError

from .. import _math as M
from .._dispatch import COMPOSITES as _COMPOSITES
from .._indexing import gather as gather, index_add as index_add, index_select as index_select
from .._indexing import scatter_add as scatter_add
from ..amp.policy import follow as _follow
from ..amp.policy import for_op as _autocast_for_op
from ..autograd.kernel_lookup import conditional_kernel_takes as _conditional_kernel_takes
from ..ops import get as _op
from ..tensor import Tensor
# The families: each module's __all__ is its public names, so a new function is public where it is written
# (star imports are re-exports to mypy --strict and IDEs).
from . import _functional_act, _functional_attention, _functional_loss
from . import functional_conv, functional_dropout, functional_norm, functional_torch, functional_vision
from ._functional_act import *  # noqa: F403
from ._functional_attention import *  # noqa: F403
from ._functional_loss import *  # noqa: F403
from .functional_conv import *  # noqa: F403
from .functional_dropout import *  # noqa: F403
from .functional_norm import *  # noqa: F403
from .functional_torch import *  # noqa: F403
from .functional_vision import *  # noqa: F403

_FAMILIES = (_functional_act, _functional_attention, _functional_loss, functional_conv, functional_dropout,
             functional_norm, functional_torch, functional_vision)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = input @ weight.T + bias, one op (the bias added in the GEMM's epilogue where the backend can)."""
    if weight.ndim == 2 and (x.ndim == 0 or x.shape[-1] != weight.shape[1]):  # name the layer, not the GEMM inside
        raise ShapeError(f"linear: input of shape {x.shape} has {x.shape[-1] if x.ndim else 0} features, but the "
                         f"weight {weight.shape} expects in_features={weight.shape[-1]}")
    if bias is not None and _fused_linear(x, weight, bias):
        return _op("linear")(x, weight, bias)  # one graph node; autocast casts all three as matmul's class says
    # weight.mT is a free view; the GEMM kernels take transposed operands without copying
    x, weight = _autocast_for_op("matmul", x, weight)  # the parameter itself is cast (and cached), not its view
    out = M.matmul(x, weight.mT)
    return M.add(out, _follow(bias, out)) if bias is not None else out  # autocast: bias in out's dtype


def _fused_linear(x: Tensor, weight: Tensor, bias: Tensor) -> bool:
    """Whether the bias'd layer goes through the linear op (the backend's fused kernel where it has one, else
    the composite below): a 2-D weight, the plain [out_features] bias, one float dtype for all three, and no
    plugin's conditional matmul kernel that would take the product (e.g. one for quantized weights). Otherwise
    matmul, then a broadcast add, with that path's promotion and error messages."""
    if not (weight.ndim == 2 and bias.ndim == 1 and bias.shape[0] == weight.shape[0]
            and x.dtype == weight.dtype == bias.dtype and x.dtype.is_floating):
        return False
    rows = 1
    for d in x.shape[:-1]:
        rows *= d
    # the shapes the matmul of the unfused path would get: x as [rows, in], the weight's [in, out] view
    return not _conditional_kernel_takes("matmul", x, [(rows, weight.shape[1]), weight.shape[::-1]], {})


def _linear_op(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """linear where the backend has no fused kernel (wgpu, float16/bfloat16 on CPU): the unfused path,
    after the op's own shape rule (so a bias that does not fit says so as the fused kernel's path does)."""
    _op("linear").schema.shape([x.shape, weight.shape, bias.shape], {})
    return M.add(M.matmul(x, weight.mT), bias)


_COMPOSITES["linear"] = _linear_op


def _linear_backward_op(g: Tensor, x: Tensor, weight: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """linear_backward where the backend has no kernel for it: the three ops it stands for."""
    _op("linear_backward").schema.shape([g.shape, x.shape, weight.shape], {})
    return (_op("matmul")(g, weight), _op("matmul")(g.mT, x),
            _op("sum")(g, dims=(0,)).reshape((weight.shape[0],)))


_COMPOSITES["linear_backward"] = _linear_backward_op


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise max(x, 0)."""
    return M.relu(x)


def sigmoid(x: Tensor) -> Tensor:
    """Elementwise logistic function."""
    return M.sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent."""
    return M.tanh(x)


def softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """exp(input) normalised to sum to 1 along `dim`."""
    return M.softmax(x, dim, dtype)


def log_softmax(x: Tensor, dim: int = -1, dtype: Any = None) -> Tensor:
    """log(softmax(input)) along `dim`, computed stably."""
    return M.log_softmax(x, dim, dtype)


def _check_same(op: str, input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        raise ShapeError(f"{op}: input shape {input.shape} and target shape {target.shape} differ; "
                         f"reshape the target (e.g. target.view({', '.join(map(str, input.shape))}))")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error between `input` and `target` (`reduction`: mean, sum or none)."""
    _check_same("mse_loss", input, target)
    d = M.sub(input, target)
    return _functional_loss.reduce_loss(M.mul(d, d), reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error between `input` and `target` (`reduction`: mean, sum or none)."""
    _check_same("l1_loss", input, target)
    return _functional_loss.reduce_loss(M.abs(M.sub(input, target)), reduction)


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


# `from rumus.nn.functional import *`: the names defined here, the core's indexing, and each family's. A run-time
# list: mypy reads the star and `as` imports instead (it takes only a literal __all__, hiding what it misses).
if not TYPE_CHECKING:
    __all__ = [
        "l1_loss", "linear", "log_softmax", "mse_loss", "one_hot", "relu", "sigmoid", "softmax", "tanh",
        "gather", "index_add", "index_select", "scatter_add",
        *(name for family in _FAMILIES for name in family.__all__),
    ]

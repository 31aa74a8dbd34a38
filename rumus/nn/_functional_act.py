"""Activations, dropout and embedding (rumus.nn.functional; PyTorch's signatures)."""

from __future__ import annotations

from rumus_contracts import RumusError, ShapeError

from .. import _math as M
from ..ops import get as _op
from ..random import default_generator
from ..tensor import Tensor

# rumus.nn.functional star-imports these: a function named here is public as F.<name>.
__all__ = [
    "celu", "dropout", "elu", "embedding", "erf", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "logsigmoid", "mish", "relu6", "selu", "silu", "softplus", "softsign", "tanhshrink",
]


def erf(x: Tensor) -> Tensor:
    """Elementwise Gauss error function."""
    return _op("erf")(x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (exact, through erf) or, with approximate='tanh', PyTorch's tanh approximation."""
    if approximate == "none":
        return _op("gelu")(x)
    if approximate == "tanh":
        return _op("gelu_tanh")(x)
    raise RumusError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise x * sigmoid(x)."""
    return _op("silu")(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """Elementwise x if x >= 0 else negative_slope * x."""
    return _op("leaky_relu")(x, negative_slope=float(negative_slope))


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """Elementwise log(1 + e ** (beta * x)) / beta, linear above `threshold`."""
    return _op("softplus")(x, beta=float(beta), threshold=float(threshold))


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Elementwise x if x > 0 else alpha * (e ** x - 1)."""
    return _op("elu")(x, alpha=float(alpha))


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise min(max(x, 0), 6)."""
    return M.clamp(x, 0.0, 6.0)


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Elementwise x clamped to [min_val, max_val]."""
    return M.clamp(x, min_val, max_val)


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise x * tanh(softplus(x))."""
    return _op("mish")(x)


def logsigmoid(x: Tensor) -> Tensor:
    """Elementwise log(sigmoid(x)), computed stably."""
    return _op("logsigmoid")(x)


def softsign(x: Tensor) -> Tensor:
    """Elementwise x / (1 + |x|)."""
    return _op("softsign")(x)


def hardswish(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise x * relu6(x + 3) / 6."""
    return _op("hardswish")(x)


def hardsigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise relu6(x + 3) / 6."""
    return _op("hardsigmoid")(x)


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise self-normalising ELU (scale 1.0507, alpha 1.6733)."""
    return _op("selu")(x)


def tanhshrink(x: Tensor) -> Tensor:
    """Elementwise x - tanh(x)."""
    return _op("tanhshrink")(x)


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Elementwise max(0, x) + min(0, alpha * (e ** (x / alpha) - 1))."""
    return _op("celu")(x, alpha=float(alpha))


# ---- dropout -----------------------------------------------------------------------------------------

def next_seed() -> int:
    """A 32-bit dropout seed from rumus's default generator (so rumus.manual_seed makes masks repeat)."""
    return int(default_generator.rng.integers(0, 2 ** 32))


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, seed: int | None = None,
            offset: int = 0) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p); identity when not training.

    The mask is a hash of (seed, offset, element index) (see rumus_contracts.ops.nn), the same on every
    backend; the seed comes from rumus's default generator unless given.
    """
    if not 0.0 <= p <= 1.0:
        raise RumusError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return M.mul(x, 0.0)
    return _op("dropout")(x, p=float(p), seed=next_seed() if seed is None else int(seed), offset=int(offset))


# ---- embedding ---------------------------------------------------------------------------------------

def normalize_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ShapeError(f"padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})")
    return padding_idx % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """weight[input]: rows of a [num_embeddings, embedding_dim] table picked by int64/int32 indices.

    Repeated indices accumulate their gradients; the padding_idx row gets none."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise RumusError("embedding: max_norm, scale_grad_by_freq and sparse gradients are not supported")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D [num_embeddings, embedding_dim], got {weight.shape}")
    return _op("embedding")(weight, input, padding_idx=normalize_padding_idx(padding_idx, weight.shape[0]))

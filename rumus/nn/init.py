"""Parameter initialisers (PyTorch's names and formulas); they write in place under no_grad."""

from __future__ import annotations

import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..random import Generator, default_generator
from ..tensor import Tensor


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"fan in/out need a tensor with >= 2 dims, got shape {t.shape}")
    receptive = int(np.prod(t.shape[2:])) if t.ndim > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    if nonlinearity in ("linear", "conv1d", "conv2d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity}")


def _write(t: Tensor, values: np.ndarray) -> Tensor:
    from .._creation import from_host
    with no_grad():
        t.copy_(from_host(values, t.dtype, t.device))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    return _write(t, (generator or default_generator).rng.uniform(a, b, t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    return _write(t, (generator or default_generator).rng.normal(mean, std, t.shape))


def constant_(t: Tensor, value: float) -> Tensor:
    with no_grad():
        t.fill_(value)
    return t


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(t, -bound, bound, generator)


def layer_default_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default init of Linear and Conv layers: kaiming_uniform_(a=sqrt(5)) on the weight, then
    the bias uniform in +-1/sqrt(fan_in), drawn in that order (so seeded models match PyTorch's)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = _fans(weight)[0]
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
        uniform_(bias, -bound, bound)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0, generator)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Generator | None = None) -> Tensor:
    rng = (generator or default_generator).rng
    vals = rng.normal(mean, std, t.shape)
    bad = (vals < a) | (vals > b)
    while bad.any():
        vals[bad] = rng.normal(mean, std, int(bad.sum()))
        bad = (vals < a) | (vals > b)
    return _write(t, vals)


def orthogonal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix over the flattened trailing dims, scaled by gain (torch's QR recipe:
    the sign of R's diagonal fixes Q so the distribution is uniform)."""
    if t.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    flat = (generator or default_generator).rng.normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(t, (gain * q).reshape(t.shape))


def eye_(t: Tensor) -> Tensor:
    """The identity in a 2-D tensor (torch.nn.init.eye_)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(t, np.eye(t.shape[0], t.shape[1]))


def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """Conv weights [out, in, *k] that pass each of the first channels through unchanged (torch's dirac_)."""
    if t.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = t.shape[0] // groups
    vals = np.zeros(t.shape)
    centre = tuple(k // 2 for k in t.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, t.shape[1])):
            vals[(g * out_per_group + d, d, *centre)] = 1.0
    return _write(t, vals)


def sparse_(t: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None) -> Tensor:
    """A 2-D tensor with `sparsity` of each column's entries zero and the rest N(0, std)."""
    if t.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rng = (generator or default_generator).rng
    rows, cols = t.shape
    vals = rng.normal(0.0, std, (rows, cols))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        vals[rng.permutation(rows)[:zeros], c] = 0.0
    return _write(t, vals)

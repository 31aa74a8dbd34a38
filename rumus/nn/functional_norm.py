"""Normalization functions with PyTorch's signatures (re-exported by rumus.nn.functional).

Each one runs the fused op (rumus_contracts.ops.nn_norm) when the tensor's backend has its kernels,
and otherwise the same math as a composite of core ops (mean, var, rsqrt, mul, add), so a backend that
has not written normalization kernels yet still trains correctly, only with more kernel launches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, RumusError, ShapeError

from .. import _creation, _runtime
from .. import _math as M
from ..autograd.grad_mode import no_grad
from ..ops import get as _op
from ..tensor import Tensor

__all__ = ["batch_norm", "group_norm", "layer_norm", "rms_norm"]

_FUSED: dict[tuple[str, str, DType], bool] = {}
_CONSTANTS: dict[tuple[float, tuple[int, ...], DType, Any], Tensor] = {}


def has_fused(op: str, x: Tensor) -> bool:
    """Whether x's backend has kernels for `op` and `op`_backward (cached)."""
    key = (op, x._storage.backend.name, x.dtype)
    hit = _FUSED.get(key)
    if hit is None:
        kernels = _runtime.plugins().kernels
        hit = _FUSED[key] = all(kernels.find(name, key[1], x.dtype) is not None for name in (op, f"{op}_backward"))
    return hit


def _constant(value: float, shape: tuple[int, ...], like: Tensor) -> Tensor:
    """A cached ones/zeros tensor standing in for absent affine parameters (never written to)."""
    key = (value, shape, like.dtype, like.device)
    t = _CONSTANTS.get(key)
    if t is None:
        t = _creation.full(shape, value, dtype=like.dtype, device=like.device)
        if len(_CONSTANTS) < 1024:
            _CONSTANTS[key] = t
    return t


def _param_shape(op: str, name: str, p: Tensor | None, shape: tuple[int, ...]) -> None:
    if p is not None and p.shape != shape:
        raise ShapeError(f"{op}: {name} has shape {p.shape}, expected {shape}")


def _normalized(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


def _check_trailing(op: str, x: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    k = len(shape)
    if k == 0 or x.ndim < k or x.shape[x.ndim - k:] != shape:
        raise ShapeError(f"{op}: given normalized_shape={list(shape)}, expected an input with shape "
                         f"[*, {', '.join(map(str, shape))}], but got an input of shape {x.shape}")
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalises over the last `normalized_shape` dims, then applies `weight` and `bias`."""
    shape = _normalized(normalized_shape)
    dims = _check_trailing("layer_norm", input, shape)
    _param_shape("layer_norm", "weight", weight, shape)
    _param_shape("layer_norm", "bias", bias, shape)
    if has_fused("layer_norm", input):
        w = weight if weight is not None else _constant(1.0, shape, input)
        b = bias if bias is not None else _constant(0.0, shape, input)
        return _op("layer_norm")(input, w, b, eps=float(eps))
    centred = M.sub(input, M.mean(input, dims, keepdim=True))
    y = M.mul(centred, M.rsqrt(M.add(M.mean(M.mul(centred, centred), dims, keepdim=True), float(eps))))
    return _affine(y, weight, bias)


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = M.mul(y, weight)
    return M.add(y, bias) if bias is not None else y


def _finfo_eps(dtype: DType) -> float:
    if dtype.name == "bfloat16":
        return 2.0 ** -7
    return float(np.finfo(dtype.name).eps)


def rms_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Divides by the root mean square over the last `normalized_shape` dims, then applies `weight`."""
    shape = _normalized(normalized_shape)
    dims = _check_trailing("rms_norm", input, shape)
    _param_shape("rms_norm", "weight", weight, shape)
    e = _finfo_eps(input.dtype) if eps is None else float(eps)
    if has_fused("rms_norm", input):
        return _op("rms_norm")(input, weight if weight is not None else _constant(1.0, shape, input), eps=e)
    y = M.mul(input, M.rsqrt(M.add(M.mean(M.mul(input, input), dims, keepdim=True), e)))
    return _affine(y, weight, None)


def _per_channel(p: Tensor, ndim: int) -> Tensor:
    return p.reshape((1, -1) + (1,) * (ndim - 2))


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalises `num_groups` channel groups per sample, then applies `weight` and `bias` per channel."""
    if input.ndim < 2:
        raise ShapeError(f"group_norm: expected an input [N, C, *], got shape {input.shape}")
    c = input.shape[1]
    if num_groups < 1 or c % num_groups:
        raise ShapeError(f"group_norm: {c} channels cannot be split into num_groups={num_groups} groups")
    _param_shape("group_norm", "weight", weight, (c,))
    _param_shape("group_norm", "bias", bias, (c,))
    if has_fused("group_norm", input):
        w = weight if weight is not None else _constant(1.0, (c,), input)
        b = bias if bias is not None else _constant(0.0, (c,), input)
        return _op("group_norm")(input, w, b, num_groups=int(num_groups), eps=float(eps))
    xg = input.reshape(input.shape[0], num_groups, -1)
    centred = M.sub(xg, M.mean(xg, 2, keepdim=True))
    y = M.mul(centred, M.rsqrt(M.add(M.mean(M.mul(centred, centred), 2, keepdim=True), float(eps))))
    y = y.reshape(input.shape)
    return _affine(y, None if weight is None else _per_channel(weight, input.ndim),
                   None if bias is None else _per_channel(bias, input.ndim))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """PyTorch's F.batch_norm: in training, batch statistics normalize and (when given) the running
    statistics are updated in place with factor `momentum` (variance unbiased); otherwise the running
    statistics normalize."""
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input [N, C, *], got shape {input.shape}")
    c = input.shape[1]
    for name, p in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        _param_shape("batch_norm", name, p, (c,))
    per_channel = input.numel() // c if c else 0
    fused = has_fused("batch_norm", input)
    if training:
        if per_channel <= 1:
            raise RumusError(f"batch_norm: expected more than 1 value per channel when training, got input of shape "
                             f"{input.shape}")
        dims = (0, *range(2, input.ndim))
        if fused:
            mean, var = _op("batch_norm_stats").multi(input.detach())
        else:
            mean = M.mean(input, dims, keepdim=True)
            var = M.var(input, dims, keepdim=True, correction=0)
        if running_mean is not None and running_var is not None:
            _update_running(running_mean, running_var, mean, var, float(momentum), per_channel)
    else:
        if running_mean is None or running_var is None:
            raise RumusError("batch_norm: running_mean and running_var are needed when training=False")
        mean, var = running_mean, running_var
    if fused:
        w = weight if weight is not None else _constant(1.0, (c,), input)
        b = bias if bias is not None else _constant(0.0, (c,), input)
        return _op("batch_norm")(input, w, b, mean, var, eps=float(eps), training=bool(training))
    if not training:
        mean, var = _per_channel(mean, input.ndim), _per_channel(var, input.ndim)
    y = M.mul(M.sub(input, mean), M.rsqrt(M.add(var, float(eps))))
    return _affine(y, None if weight is None else _per_channel(weight, input.ndim),
                   None if bias is None else _per_channel(bias, input.ndim))


def _update_running(running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor, momentum: float,
                    n: int) -> None:
    c = running_mean.shape[0]
    with no_grad():
        new_mean = M.add(M.mul(running_mean, 1.0 - momentum), M.mul(mean.detach().reshape(c), momentum))
        new_var = M.add(M.mul(running_var, 1.0 - momentum), M.mul(var.detach().reshape(c), momentum * n / (n - 1)))
        running_mean.copy_(new_mean)
        running_var.copy_(new_var)

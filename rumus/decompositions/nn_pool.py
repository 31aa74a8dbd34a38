"""Decompositions of max_pool2d, avg_pool2d and their backward ops (rumus_contracts.ops.nn_pool).

Each window is read with the im2col `gather` of the convolutions (`_nn_windows`), as
[N, C, kh*kw, Ho*Wo] (padding reads as 0 for averages, as -inf for maxima, so it never wins). Average
pooling reduces it with `sum` and divides by a host-computed divisor per output (PyTorch's
count_include_pad / divisor_override / ceil_mode rules, as the kernels apply them).

Max pooling picks each window's element as PyTorch's CPU kernel does (a later element wins if it is
greater or NaN): the last NaN of a window if it holds one, else the first element equal to the maximum
(a window of -inf values picks its first element inside the plane). The pick is found with `amax`
reductions over the kernel offsets; max_pool2d reads it with `gather`, so its gradient reaches that
element alone, and max_pool2d_backward adds each window's gradient there (ties are never shared).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from rumus_contracts import Device, float32, int64, parse_dtype
from rumus_contracts.ops.nn_pool import pool_output_shape

from .. import _math as M
from .. import _views
from .._creation import from_host
from .._tensor_base import Tensor
from ..ops import get as _op
from . import register
from ._nn_windows import Geometry, Windows, gather, host_tables, scatter, windows
from ._precision import narrow, widen


def _geometry(op: str, shape: tuple[int, ...], attrs: dict[str, Any]) -> Geometry:
    _, _, ho, wo = pool_output_shape(op, shape, attrs)
    (kh, kw), (sh, sw), (ph, pw) = (tuple(int(v) for v in attrs[k]) for k in ("kernel_size", "stride", "padding"))
    dh, dw = (int(v) for v in attrs.get("dilation", (1, 1)))
    return Geometry(shape[2], shape[3], kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)


# ---- average pooling --------------------------------------------------------------------------------

def _host_divisors(g: Geometry, count_include_pad: bool, divisor_override: int | None) -> np.ndarray:
    """[P] divisors: the window clipped to the padded input (count_include_pad) or to the input."""
    if divisor_override:
        return np.full(g.positions, float(divisor_override))
    rows, cols = host_tables(g)
    r0: np.ndarray = rows[0]  # each window's first row and column
    c0: np.ndarray = cols[0]
    r1, c1 = np.minimum(r0 + g.kh, g.h + g.ph), np.minimum(c0 + g.kw, g.w + g.pw)
    if not count_include_pad:  # the window clipped to the input
        r0, c0, r1, c1 = np.maximum(r0, 0), np.maximum(c0, 0), np.minimum(r1, g.h), np.minimum(c1, g.w)
    out: np.ndarray = ((r1 - r0) * (c1 - c0)).astype(np.float64)
    return out


@lru_cache(maxsize=64)
def _divisors(g: Geometry, count_include_pad: bool, divisor_override: int | None, dtype_name: str,
              device: Device) -> Tensor:
    return from_host(_host_divisors(g, count_include_pad, divisor_override), parse_dtype(dtype_name), device)


def _avg_attrs(kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool) -> dict[str, Any]:
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding, "ceil_mode": ceil_mode}


@register("avg_pool2d")
def avg_pool2d(x: Tensor, *, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool,
               divisor_override: int | None) -> Tensor:
    dtype = x.dtype
    (x,) = widen(x)
    g = _geometry("avg_pool2d", x.shape, _avg_attrs(kernel_size, stride, padding, ceil_mode))
    sums = _op("sum")(gather(x, windows(g, x.device), 0.0), dims=(2,))  # [N, C, 1, P]
    div = _divisors(g, bool(count_include_pad), divisor_override, x.dtype.name, x.device)
    return narrow(_views.reshape(M.div(sums, div), (x.shape[0], x.shape[1], g.ho, g.wo)), dtype)


@register("avg_pool2d_backward")
def avg_pool2d_backward(grad: Tensor, *, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                        count_include_pad: bool, divisor_override: int | None, input_size: Any) -> Tensor:
    dtype = grad.dtype
    (grad,) = widen(grad)
    n, c = grad.shape[0], grad.shape[1]
    shape = (n, c, *(int(v) for v in input_size))
    g = _geometry("avg_pool2d_backward", shape, _avg_attrs(kernel_size, stride, padding, ceil_mode))
    div = _divisors(g, bool(count_include_pad), divisor_override, grad.dtype.name, grad.device)
    share = M.div(_views.reshape(grad, (n, c, 1, g.positions)), div)
    return narrow(scatter(_views.expand(share, (n, c, g.kernel, g.positions)), windows(g, grad.device)), dtype)


# ---- max pooling ------------------------------------------------------------------------------------

def _max_attrs(kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool) -> dict[str, Any]:
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation,
            "ceil_mode": ceil_mode}


def _pick(cols: Tensor, inside: Tensor, k: Tensor) -> Tensor:
    """[N, C, 1, P]: the kernel offset of each window's chosen element as a float32 (K where the window
    has no element inside the plane): the last NaN if it holds one, else the first maximum."""
    kernel = float(k.shape[0])
    top = _op("amax")(cols, dims=(2,))  # NaN where the window holds one
    # first element equal to the maximum: the largest K - k among them (0 if none: top is NaN)
    first = M.sub(kernel, _op("amax")(M.where(M.logical_and(M.eq(cols, top), inside), M.sub(kernel, k), 0.0),
                                      dims=(2,)))
    # last NaN: the largest k + 1 among them (0 if none)
    last_nan = _op("amax")(M.where(M.isnan(cols), M.add(k, 1.0), 0.0), dims=(2,))
    return M.where(M.gt(last_nan, 0.0), M.sub(last_nan, 1.0), first)


@lru_cache(maxsize=64)
def _offsets(kernel: int, device: Device) -> Tensor:
    """[K, 1]: 0, 1, ..., K-1 in float32 (exact to 2^24; half precision would round offsets past 256)."""
    return from_host(np.arange(kernel, dtype=np.float64).reshape(kernel, 1), float32, device)


def _windows_of(op: str, x: Tensor, attrs: dict[str, Any]) -> tuple[Geometry, Windows, Tensor, Tensor]:
    """(geometry, windows, x's windows [N, C, K, P] with -inf outside the plane, the kernel offsets [K, 1])."""
    g = _geometry(op, x.shape, attrs)
    win = windows(g, x.device)
    return g, win, gather(x, win, float("-inf")), _offsets(g.kernel, x.device)


@register("max_pool2d")
def max_pool2d(x: Tensor, *, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool) -> Tensor:
    # the chosen element is read with gather (not amax), so the gradient goes to that one element, as
    # max_pool2d_backward gives it, and ties are not shared
    g, win, cols, k = _windows_of("max_pool2d", x, _max_attrs(kernel_size, stride, padding, dilation, ceil_mode))
    inside = _views.reshape(win.inside, (g.kernel, g.positions))
    pick = _pick(cols.detach(), inside, k)
    index = M.cast(M.minimum(pick, float(g.kernel - 1)), int64)  # a window with no element reads -inf anyway
    best = _op("gather")(cols, index, dim=2)
    return _views.reshape(best, (x.shape[0], x.shape[1], g.ho, g.wo))


@register("max_pool2d_backward")
def max_pool2d_backward(grad: Tensor, x: Tensor, *, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                        ceil_mode: bool) -> Tensor:
    dtype = x.dtype
    grad, x = widen(grad, x)  # shared maxima add up in float32
    n, c = x.shape[0], x.shape[1]
    attrs = _max_attrs(kernel_size, stride, padding, dilation, ceil_mode)
    g, win, cols, k = _windows_of("max_pool2d_backward", x.detach(), attrs)  # the choice is not differentiated
    chosen = M.eq(k, _pick(cols, _views.reshape(win.inside, (g.kernel, g.positions)), k))  # [N, C, K, P]
    share = M.where(chosen, _views.reshape(grad, (n, c, 1, g.positions)), 0.0)
    return narrow(scatter(share, win), dtype)

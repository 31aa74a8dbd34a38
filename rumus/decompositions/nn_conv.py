"""Decompositions of conv2d and its two adjoints (rumus_contracts.ops.nn_conv) as im2col + matmul.

The windows of x are read with one `gather` over each H*W plane (zeros where they reach the
padding), giving cols [N, groups, C/groups*kh*kw, Ho*Wo] as a free reshape; each group is then one
batched matmul with the weight [groups, O/groups, C/groups*kh*kw]. The input gradient is the same
matmul transposed followed by col2im (`scatter_add`), the weight gradient the matmul of the gradient
with cols. Every step is a differentiable core op, so second derivatives come for free. Half precision
runs in float32 (`_precision`).
"""

from __future__ import annotations

from typing import Any

from rumus_contracts.ops.nn_conv import out_size

from .. import _views
from .._tensor_base import Tensor
from ..ops import get as _op
from . import register
from ._nn_windows import Geometry, gather, scatter, windows
from ._precision import narrow, widen


def _geometry(h: int, w: int, kh: int, kw: int, stride: Any, padding: Any, dilation: Any) -> Geometry:
    (sh, sw), (ph, pw), (dh, dw) = (tuple(int(v) for v in a) for a in (stride, padding, dilation))
    return Geometry(h, w, kh, kw, sh, sw, ph, pw, dh, dw, out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw))


def _cols(x: Tensor, g: Geometry, groups: int) -> Tensor:
    """x's windows as [N, groups, C/groups*kh*kw, Ho*Wo] (channel-major, then kernel offset)."""
    n, c = x.shape[0], x.shape[1]
    cols = gather(x, windows(g, x.device), 0.0)
    return _views.reshape(cols, (n, groups, c // groups * g.kernel, g.positions))


@register("conv2d")
def conv2d(x: Tensor, weight: Tensor, *, stride: Any, padding: Any, dilation: Any, groups: int) -> Tensor:
    dtype = x.dtype
    x, weight = widen(x, weight)
    o, cg, kh, kw = weight.shape
    g = _geometry(x.shape[2], x.shape[3], kh, kw, stride, padding, dilation)
    wm = _views.reshape(weight, (groups, o // groups, cg * kh * kw))
    out = _op("matmul")(wm, _cols(x, g, groups))  # [G, O/G, K] @ [N, G, K, P] -> [N, G, O/G, P]
    return narrow(_views.reshape(out, (x.shape[0], o, g.ho, g.wo)), dtype)


@register("conv2d_backward_input")
def conv2d_backward_input(grad: Tensor, weight: Tensor, *, stride: Any, padding: Any, dilation: Any, groups: int,
                          input_size: Any) -> Tensor:
    dtype = grad.dtype
    grad, weight = widen(grad, weight)
    n, o, ho, wo = grad.shape
    _, cg, kh, kw = weight.shape
    h, w = (int(v) for v in input_size)
    g = _geometry(h, w, kh, kw, stride, padding, dilation)
    wm = _views.reshape(weight, (groups, o // groups, cg * kh * kw))
    gm = _views.reshape(grad, (n, groups, o // groups, ho * wo))
    cols = _op("matmul")(_views.matrix_transpose(wm), gm)  # [G, K, O/G] @ [N, G, O/G, P] -> [N, G, K, P]
    cols = _views.reshape(cols, (n, groups * cg, g.kernel, g.positions))
    return narrow(scatter(cols, windows(g, grad.device)), dtype)


@register("conv2d_backward_weight")
def conv2d_backward_weight(grad: Tensor, x: Tensor, *, stride: Any, padding: Any, dilation: Any, groups: int,
                           kernel_size: Any) -> Tensor:
    dtype = grad.dtype
    grad, x = widen(grad, x)
    n, o, ho, wo = grad.shape
    kh, kw = (int(v) for v in kernel_size)
    g = _geometry(x.shape[2], x.shape[3], kh, kw, stride, padding, dilation)
    gm = _views.reshape(grad, (n, groups, o // groups, ho * wo))
    per_sample = _op("matmul")(gm, _views.matrix_transpose(_cols(x, g, groups)))  # [N, G, O/G, K]
    gw = _op("sum")(per_sample, dims=(0,))
    return narrow(_views.reshape(gw, (o, x.shape[1] // groups, kh, kw)), dtype)

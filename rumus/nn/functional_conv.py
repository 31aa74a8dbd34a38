"""Convolution and pooling functions with PyTorch's signatures (re-exported by rumus.nn.functional),
plus the core implementations of the two composite ops, conv_transpose2d and adaptive_avg_pool2d.

Kernel-level ops take batched 4-D tensors and normalized (h, w) pairs; everything PyTorch accepts on
top (ints for pairs, unbatched 3-D inputs, padding="same"/"valid", bias, 1-D convolutions) is handled
here with views and elementwise ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, RumusError, ShapeError
from rumus_contracts.ops.nn_conv import transpose_output_size
from rumus_contracts.ops.nn_pool import adaptive_bounds

from .. import _math as M
from .._dispatch import COMPOSITES
from ..amp.policy import follow
from ..autograd.kernel_lookup import conditional_kernel_takes
from ..ops import get as _op
from ..tensor import Tensor

Pair = tuple[int, int]

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d"]


def pair(value: Any, name: str = "value") -> Pair:
    """An int or a sequence of one or two ints as an (h, w) pair."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    try:
        items = tuple(int(v) for v in value)
    except TypeError:
        raise RumusError(f"{name} must be an int or a pair of ints, got {value!r}") from None
    if len(items) == 1:
        return items[0], items[0]
    if len(items) != 2:
        raise RumusError(f"{name} must be an int or a pair of ints, got {value!r}")
    return items[0], items[1]


def _batched(op: str, x: Tensor) -> tuple[Tensor, bool]:
    """x as [N, C, H, W]; unbatched [C, H, W] inputs get a batch dim (and lose it again after)."""
    if x.ndim == 4:
        return x, True
    if x.ndim == 3:
        return x.unsqueeze(0), False
    raise ShapeError(f"{op}: expected a 3-D (unbatched) or 4-D (batched) input, got shape {x.shape}")


def _same_padding(weight_hw: Sequence[int], dilation: Pair, stride: Pair) -> tuple[Pair, Pair]:
    """Symmetric padding and the leading rows/cols to drop so the output matches PyTorch's "same"
    (which pads total // 2 before and the rest after)."""
    if stride != (1, 1):
        raise RumusError("padding='same' is not supported for strided convolutions; give explicit padding")
    totals = [dilation[i] * (int(weight_hw[i]) - 1) for i in range(2)]
    return ((totals[0] + 1) // 2, (totals[1] + 1) // 2), (totals[0] % 2, totals[1] % 2)


def _fused_bias(x: Tensor, weight: Tensor, bias: Tensor, attrs: dict[str, Any]) -> bool:
    """Whether conv2d's bias goes through the conv2d_bias op (the backend's fused kernel where it has one,
    else the composite below): the bias is the plain [out_channels] vector in the operands' dtype, and no
    plugin's conditional conv2d kernel (rumus-vision's direct convolutions) would take the call. Otherwise the
    bias is a separate broadcast add, with that path's promotion and error messages."""
    return (bias.ndim == 1 and weight.ndim == 4 and x.ndim == 4 and bias.shape[0] == weight.shape[0]
            and bias.dtype == x.dtype == weight.dtype
            and not conditional_kernel_takes("conv2d", x, [x.shape, weight.shape], attrs))


def _conv2d_bias_op(x: Tensor, weight: Tensor, bias: Tensor, **attrs: Any) -> Tensor:
    """conv2d_bias where the backend has no fused kernel: conv2d, then the bias per output channel (the op's
    own shape rule first, so a bias that does not fit says so as the fused kernel's path does)."""
    schema = _op("conv2d_bias").schema
    schema.shape([x.shape, weight.shape, bias.shape], schema.bind_attrs(attrs))
    return M.add(_op("conv2d")(x, weight, **attrs), bias.reshape(1, -1, 1, 1))


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution of [N, C, H, W] `input` with `weight` [out, in / groups, kh, kw] (stride, padding, dilation,
    groups).
    """
    x, batched = _batched("conv2d", input)
    s, d = pair(stride, "stride"), pair(dilation, "dilation")
    crop = (0, 0)
    if isinstance(padding, str):
        if padding == "valid":
            p: Pair = (0, 0)
        elif padding == "same":
            p, crop = _same_padding(weight.shape[2:], d, s)
        else:
            raise RumusError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    else:
        p = pair(padding, "padding")
    attrs = {"stride": s, "padding": p, "dilation": d, "groups": int(groups)}
    if bias is not None and crop == (0, 0) and _fused_bias(x, weight, bias, attrs):
        y = _op("conv2d_bias")(x, weight, bias, **attrs)
        return y if batched else y.squeeze(0)
    y = _op("conv2d")(x, weight, stride=s, padding=p, dilation=d, groups=int(groups))
    if crop != (0, 0):
        y = y[:, :, crop[0]:, crop[1]:]
    if bias is not None:
        y = M.add(y, follow(bias, y).reshape(1, -1, 1, 1))  # autocast: the bias in the output's dtype
    return y if batched else y.squeeze(0)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """A conv2d over [N, C, 1, L] with a [O, C/groups, 1, k] weight (views both ways)."""
    if input.ndim not in (2, 3):
        raise ShapeError(f"conv1d: expected a 2-D (unbatched) or 3-D (batched) input, got shape {input.shape}")
    if weight.ndim != 3:
        raise ShapeError(f"conv1d: weight must be 3-D [out_channels, in_channels/groups, k], got {weight.shape}")
    pad: Any = padding if isinstance(padding, str) else (0, _single(padding, "padding"))
    y = conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, _single(stride, "stride")), pad,
               (1, _single(dilation, "dilation")), groups)
    return y.squeeze(-2)


def _single(value: Any, name: str) -> int:
    if isinstance(value, (int, np.integer)):
        return int(value)
    items = tuple(value)
    if len(items) != 1:
        raise RumusError(f"{name} must be an int or a 1-tuple for a 1-D op, got {value!r}")
    return int(items[0])


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """2-D transposed convolution with `weight` [in, out / groups, kh, kw] (stride, padding, output_padding, groups,
    dilation).
    """
    x, batched = _batched("conv_transpose2d", input)
    y = _op("conv_transpose2d")(x, weight, stride=pair(stride, "stride"), padding=pair(padding, "padding"),
                                output_padding=pair(output_padding, "output_padding"),
                                dilation=pair(dilation, "dilation"), groups=int(groups))
    if bias is not None:
        y = M.add(y, follow(bias, y).reshape(1, -1, 1, 1))  # autocast: the bias in the output's dtype
    return y if batched else y.squeeze(0)


def transposed_output_padding(input_hw: Sequence[int], output_size: Sequence[int], kernel: Pair, stride: Pair,
                              padding: Pair, dilation: Pair) -> Pair:
    """The output_padding giving `output_size` (ConvTranspose2d.forward(x, output_size=...))."""
    out = []
    for i in range(2):
        least = transpose_output_size(int(input_hw[i]), kernel[i], stride[i], padding[i], dilation[i], 0)
        extra = int(output_size[i]) - least
        if not 0 <= extra < stride[i]:
            raise ShapeError(f"conv_transpose2d: output size {tuple(output_size)} is not reachable from input size "
                             f"{tuple(input_hw)}: dim {i} must lie in [{least}, {least + stride[i] - 1}]")
        out.append(extra)
    return out[0], out[1]


def _conv_transpose2d_op(x: Tensor, weight: Tensor, stride: Pair = (1, 1), padding: Pair = (0, 0),
                         output_padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1) -> Tensor:
    attrs = {"stride": stride, "padding": padding, "output_padding": output_padding, "dilation": dilation,
             "groups": groups}
    (shape,) = _op("conv_transpose2d").schema.shape([x.shape, weight.shape], attrs)
    return _op("conv2d_backward_input")(x, weight, input_size=shape[2:], stride=stride, padding=padding,
                                        dilation=dilation, groups=groups)


# ---- pooling ------------------------------------------------------------------------------------------

def _pool_stride(stride: Any, kernel: Pair) -> Pair:
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return kernel
    return pair(stride, "stride")


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """2-D max pooling of [N, C, H, W] (kernel_size, stride, padding, dilation, ceil_mode, return_indices)."""
    if return_indices:
        raise RumusError("max_pool2d: return_indices=True is not supported (rumus finds the maxima again in the "
                         "backward pass instead of keeping indices)")
    x, batched = _batched("max_pool2d", input)
    k = pair(kernel_size, "kernel_size")
    y = _op("max_pool2d")(x, kernel_size=k, stride=_pool_stride(stride, k), padding=pair(padding, "padding"),
                          dilation=pair(dilation, "dilation"), ceil_mode=bool(ceil_mode))
    return y if batched else y.squeeze(0)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-D average pooling of [N, C, H, W] (kernel_size, stride, padding, ceil_mode, count_include_pad)."""
    x, batched = _batched("avg_pool2d", input)
    k = pair(kernel_size, "kernel_size")
    y = _op("avg_pool2d")(x, kernel_size=k, stride=_pool_stride(stride, k), padding=pair(padding, "padding"),
                          ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
                          divisor_override=None if divisor_override is None else int(divisor_override))
    return y if batched else y.squeeze(0)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """2-D average pooling of [N, C, H, W] to `output_size`, whatever the input size."""
    x, batched = _batched("adaptive_avg_pool2d", input)
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size, output_size)
    sizes = tuple(output_size)
    if len(sizes) != 2:
        raise RumusError(f"adaptive_avg_pool2d: output_size must be an int or a pair, got {output_size!r}")
    out = tuple(x.shape[2 + i] if sizes[i] is None else int(sizes[i]) for i in range(2))
    y = _op("adaptive_avg_pool2d")(x, output_size=out)
    return y if batched else y.squeeze(0)


_AVERAGING: dict[tuple[int, int, bool, DType, Any], Tensor] = {}


def _averaging_matrix(size: int, out: int, transpose: bool, like: Tensor) -> Tensor:
    """[out, size] with 1/len(window) over each adaptive window (or its transpose), cached per device."""
    key = (size, out, transpose, like.dtype, like.device)
    m = _AVERAGING.get(key)
    if m is None:
        from .._creation import from_host
        a = np.zeros((out, size))
        for i, (lo, hi) in enumerate(adaptive_bounds(size, out)):
            a[i, lo:hi] = 1.0 / (hi - lo)
        m = from_host(a.T.copy() if transpose else a, like.dtype, like.device)
        if len(_AVERAGING) < 256:
            _AVERAGING[key] = m
    return m


def _adaptive_avg_pool2d_op(x: Tensor, output_size: Pair = (1, 1)) -> Tensor:
    (shape,) = _op("adaptive_avg_pool2d").schema.shape([x.shape], {"output_size": output_size})
    (h, w), (ho, wo) = x.shape[2:], shape[2:]
    if (ho, wo) == (1, 1):
        return M.mean(x, dim=(2, 3), keepdim=True)
    if h % ho == 0 and w % wo == 0:  # equal windows: plain average pooling
        k = (h // ho, w // wo)
        return _op("avg_pool2d")(x, kernel_size=k, stride=k, padding=(0, 0), ceil_mode=False,
                                 count_include_pad=True, divisor_override=None)
    # overlapping or uneven windows: y = A_h @ x @ A_w^T with constant averaging matrices
    return M.matmul(M.matmul(_averaging_matrix(h, ho, False, x), x), _averaging_matrix(w, wo, True, x))


COMPOSITES.update({"conv_transpose2d": _conv_transpose2d_op, "adaptive_avg_pool2d": _adaptive_avg_pool2d_op,
                   "conv2d_bias": _conv2d_bias_op})

"""TensorArg -> numpy: the strided view every host backend's kernels start from."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor_arg import TensorArg


def strided_view(arg: TensorArg) -> np.ndarray[Any, Any]:
    """The elements of `arg` as a numpy view of its buffer: no copy, writable, `arg.shape` with
    `arg.strides` and `arg.offset` (both in elements) applied.

    `arg.buffer` must be a C-contiguous 1-D numpy array (a host backend's storage). Broadcast inputs
    arrive with stride 0 and come out as numpy broadcast views. A tensor with a size-0 dim gives a new
    empty array of its shape: such a view's offset may lie past the end of its buffer (a slice taken at
    the end), where numpy refuses to build a view, and there is nothing to read or write anyway.
    """
    buf = arg.buffer
    if 0 in arg.shape:
        return np.empty(arg.shape, buf.dtype)
    isz = buf.itemsize
    return np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))


def host_copy(arg: TensorArg) -> np.ndarray[Any, Any]:
    """A new C-contiguous array holding `arg`'s elements (what ``Backend.to_numpy`` returns)."""
    return np.array(strided_view(arg), order="C", copy=True)

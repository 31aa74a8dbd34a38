"""conv2d (and its two backward ops) as im2col/col2im in C around one numpy GEMM per group, and 2-D
max/avg pooling in C.

The GEMM runs channel-major over the whole batch, [O, K] @ [K, N*Ho*Wo], rather than once per sample:
one large sgemm keeps BLAS efficient where per-sample products of a few hundred columns do not. The
[O, N, HW] <-> [N, O, HW] reorders are plain row copies in C. Very large batches are processed in
chunks of samples so that the column buffer stays bounded (CHUNK_ELEMENTS).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg

from ._lib import ffi, lib
from .dtypes import FLOAT

_from_buffer = ffi.from_buffer
_SFX = {"float32": "f32", "float64": "f64"}
CHUNK_ELEMENTS = 1 << 24  # column-buffer elements per chunk of samples (64 MiB of float32)


def _fns(name: str) -> dict[str, Any]:
    return {dt: getattr(lib, f"rumus_{name}_{sfx}") for dt, sfx in _SFX.items()}


_IM2COL, _COL2IM = _fns("im2col"), _fns("col2im")
_TO_NCHW, _FROM_NCHW = _fns("conv_to_nchw"), _fns("conv_from_nchw")
_MAX, _MAX_BACK = _fns("max_pool2d"), _fns("max_pool2d_backward")
_AVG, _AVG_BACK = _fns("avg_pool2d"), _fns("avg_pool2d_backward")


def ptr(arg: TensorArg) -> Any:
    """char* to the tensor's first element (kernels here take contiguous tensors)."""
    return _from_buffer(arg.buffer) + arg.offset * arg.buffer.itemsize


def view(arg: TensorArg) -> np.ndarray:
    buf = arg.buffer
    isz = buf.itemsize
    return np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))


class _Workspace(threading.local):
    """Scratch buffers reused across calls (one set per thread), grown on demand."""

    def __init__(self) -> None:
        self.buffers: dict[tuple[str, str], np.ndarray] = {}

    def get(self, slot: str, dtype: np.dtype[Any], n: int) -> np.ndarray:
        buf = self.buffers.get((slot, dtype.name))
        if buf is None or buf.size < n:
            buf = self.buffers[(slot, dtype.name)] = np.empty(max(n, 1), dtype)
        return buf[:n]


_ws = _Workspace()

_GEOM: dict[tuple[Any, ...], Any] = {}


def _geom(values: tuple[int, ...]) -> Any:
    g = _GEOM.get(values)
    if g is None:
        if len(_GEOM) > 4096:
            _GEOM.clear()
        g = _GEOM[values] = ffi.new("int64_t[]", list(values))
    return g


def _conv_geom(n: int, x_shape: tuple[int, ...], k: tuple[int, int], out_hw: tuple[int, int],
               attrs: Mapping[str, Any]) -> Any:
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    return _geom((n, x_shape[1], x_shape[2], x_shape[3], k[0], k[1], int(sh), int(sw), int(ph), int(pw), int(dh),
                  int(dw), out_hw[0], out_hw[1]))


def _chunk(n: int, per_sample: int) -> int:
    return max(1, min(n, CHUNK_ELEMENTS // max(per_sample, 1)))


def conv2d(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, (x, w) = outputs[0], inputs
    if y.numel == 0:
        return
    n, o, ho, wo = y.shape
    g, k, hw = int(attrs["groups"]), w.shape[1] * w.shape[2] * w.shape[3], ho * wo
    dt = x.dtype.name
    wv = view(w).reshape(g, o // g, k)
    plane_x, plane_y = x.shape[1] * x.shape[2] * x.shape[3], o * hw
    isz = x.buffer.itemsize
    step = _chunk(n, g * k * hw)
    for n0 in range(0, n, step):
        nb = min(step, n - n0)
        cols = _ws.get("cols", x.buffer.dtype, g * k * nb * hw)
        _IM2COL[dt](ptr(x) + n0 * plane_x * isz, _from_buffer(cols), _conv_geom(nb, x.shape, w.shape[2:], (ho, wo), attrs))
        if nb == 1:  # one sample: [O, HW] is already its NCHW layout
            np.matmul(wv, cols.reshape(g, k, hw), out=view(y)[n0].reshape(g, o // g, hw))
            continue
        prod = _ws.get("prod", x.buffer.dtype, o * nb * hw)
        np.matmul(wv, cols.reshape(g, k, nb * hw), out=prod.reshape(g, o // g, nb * hw))
        _TO_NCHW[dt](_from_buffer(prod), ptr(y) + n0 * plane_y * isz, nb, o, hw)


def conv2d_backward_input(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx, (gy, w) = outputs[0], inputs
    if gx.numel == 0:
        return
    n, o, ho, wo = gy.shape
    g, k, hw = int(attrs["groups"]), w.shape[1] * w.shape[2] * w.shape[3], ho * wo
    dt = gy.dtype.name
    wt = view(w).reshape(g, o // g, k).transpose(0, 2, 1)
    plane_x, plane_y = gx.shape[1] * gx.shape[2] * gx.shape[3], o * hw
    isz = gy.buffer.itemsize
    step = _chunk(n, g * k * hw)
    for n0 in range(0, n, step):
        nb = min(step, n - n0)
        if nb == 1:
            gt = view(gy)[n0].reshape(g, o // g, hw)
        else:
            t = _ws.get("prod", gy.buffer.dtype, o * nb * hw)
            _FROM_NCHW[dt](ptr(gy) + n0 * plane_y * isz, _from_buffer(t), nb, o, hw)
            gt = t.reshape(g, o // g, nb * hw)
        cols = _ws.get("cols", gy.buffer.dtype, g * k * nb * hw)
        np.matmul(wt, gt, out=cols.reshape(g, k, nb * hw))
        _COL2IM[dt](_from_buffer(cols), ptr(gx) + n0 * plane_x * isz,
                    _conv_geom(nb, gx.shape, w.shape[2:], (ho, wo), attrs))


def conv2d_backward_weight(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gw, (gy, x) = outputs[0], inputs
    out = view(gw)
    n, o, ho, wo = gy.shape
    g, k, hw = int(attrs["groups"]), gw.shape[1] * gw.shape[2] * gw.shape[3], ho * wo
    if n == 0:
        out[...] = 0
        return
    dt = gy.dtype.name
    plane_x, plane_y = x.shape[1] * x.shape[2] * x.shape[3], o * hw
    isz = gy.buffer.itemsize
    step = _chunk(n, g * k * hw)
    target = out.reshape(g, o // g, k)
    for n0 in range(0, n, step):
        nb = min(step, n - n0)
        cols = _ws.get("cols", x.buffer.dtype, g * k * nb * hw)
        _IM2COL[dt](ptr(x) + n0 * plane_x * isz, _from_buffer(cols), _conv_geom(nb, x.shape, gw.shape[2:], (ho, wo), attrs))
        if nb == 1:
            gt = view(gy)[n0].reshape(g, o // g, hw)
        else:
            t = _ws.get("prod", gy.buffer.dtype, o * nb * hw)
            _FROM_NCHW[dt](ptr(gy) + n0 * plane_y * isz, _from_buffer(t), nb, o, hw)
            gt = t.reshape(g, o // g, nb * hw)
        colsT = cols.reshape(g, k, nb * hw).transpose(0, 2, 1)
        if n0 == 0:
            np.matmul(gt, colsT, out=target)
        else:
            target += np.matmul(gt, colsT)


# ---- pooling ---------------------------------------------------------------------------------------

def _pool_geom(x_shape: tuple[int, ...], y_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> Any:
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    dh, dw = attrs.get("dilation", (1, 1))
    div = attrs.get("divisor_override")
    return _geom((x_shape[0] * x_shape[1], x_shape[2], x_shape[3], y_shape[2], y_shape[3], int(kh), int(kw),
                  int(sh), int(sw), int(ph), int(pw), int(dh), int(dw), int(bool(attrs.get("count_include_pad", True))),
                  int(div) if div else 0))


def max_pool2d(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, x = outputs[0], inputs[0]
    if y.numel:
        _MAX[x.dtype.name](ptr(x), ptr(y), _pool_geom(x.shape, y.shape, attrs))


def max_pool2d_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx, (gy, x) = outputs[0], inputs
    if gx.numel:
        _MAX_BACK[x.dtype.name](ptr(gy), ptr(x), ptr(gx), _pool_geom(x.shape, gy.shape, attrs))


def avg_pool2d(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, x = outputs[0], inputs[0]
    if y.numel:
        _AVG[x.dtype.name](ptr(x), ptr(y), _pool_geom(x.shape, y.shape, attrs))


def avg_pool2d_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    gx, gy = outputs[0], inputs[0]
    if gx.numel:
        _AVG_BACK[gy.dtype.name](ptr(gy), ptr(gx), _pool_geom(gx.shape, gy.shape, attrs))


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    ("conv2d", conv2d, FLOAT),
    ("conv2d_backward_input", conv2d_backward_input, FLOAT),
    ("conv2d_backward_weight", conv2d_backward_weight, FLOAT),
    ("max_pool2d", max_pool2d, FLOAT),
    ("max_pool2d_backward", max_pool2d_backward, FLOAT),
    ("avg_pool2d", avg_pool2d, FLOAT),
    ("avg_pool2d_backward", avg_pool2d_backward, FLOAT),
]

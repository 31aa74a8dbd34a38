"""conv2d (and its two backward ops) and 2-D max/avg pooling in C.

The convolution runs in csrc/nn_conv.c's fused kernels: units of (sample, group, band of output rows),
each an im2col of its band into a per-thread buffer that stays in cache and one single-threaded BLAS
call reading and writing NCHW, spread over the kernels' threads; the weight gradient sums fixed slices
of the batch and adds them in order. The units come from the shape alone, so results are bit-identical at
every thread count.

Where numpy's BLAS is not attached (not OpenBLAS), im2col/col2im in C run around numpy GEMMs, with two
layouts of the column buffer, picked by the size of one sample's product (see _per_sample):
  per sample    [N, groups, K, HW] (K = C/groups*kh*kw): one batched matmul of [O/g, K] @ [K, HW] products
                that reads and writes NCHW directly;
  channel-major [groups, K, N*HW]: one [O/g, K] @ [K, N*HW] GEMM per group, with the NCHW <-> [O, N, HW]
                reorders done by row copies in C.
Large batches are then processed in chunks of samples so that the scratch buffers stay bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType, Kernel, TensorArg
from rumus_contracts.errors import OutOfMemory
from rumus_contracts.kit import strided_view as view  # numpy view of a TensorArg (size-0 dims included)

from ._lib import ffi, lib
from .dtypes import FLOAT
from .kernels_linalg import gemm  # the same blocks at every thread count: bit-identical results

_from_buffer = ffi.from_buffer
_SFX = {"float32": "f32", "float64": "f64"}
CHUNK_ELEMENTS = 1 << 21  # scratch elements per chunk of samples (8 MiB of float32)
PER_SAMPLE_MAX = 4 * 65536  # largest per-sample product (M*N*K) run as a batch of small GEMMs


def _fns(name: str) -> dict[str, Any]:
    return {dt: getattr(lib, f"rumus_{name}_{sfx}") for dt, sfx in _SFX.items()}


_IM2COL, _COL2IM = _fns("im2col"), _fns("col2im")
_TO_NCHW, _FROM_NCHW = _fns("conv_to_nchw"), _fns("conv_from_nchw")
_FUSED, _FUSED_BI = _fns("conv2d_fused"), _fns("conv2d_fused_backward_input")
_FUSED_BW = _fns("conv2d_fused_backward_weight")
_FUSED_BIAS = _fns("conv2d_fused_bias")
_MAX, _MAX_BACK = _fns("max_pool2d"), _fns("max_pool2d_backward")
_AVG, _AVG_BACK = _fns("avg_pool2d"), _fns("avg_pool2d_backward")


def ptr(arg: TensorArg) -> Any:
    """char* to the tensor's first element (kernels here take contiguous tensors)."""
    return _from_buffer(arg.buffer) + arg.offset * arg.buffer.itemsize


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


def _conv_geom(n: int, x_shape: tuple[int, ...], k: tuple[int, ...], out_hw: tuple[int, int],
               attrs: Mapping[str, Any], layout: int, out_channels: int = 0) -> Any:
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    return _geom((n, x_shape[1], x_shape[2], x_shape[3], k[0], k[1], int(sh), int(sw), int(ph), int(pw), int(dh),
                  int(dw), out_hw[0], out_hw[1], layout, out_channels, int(attrs["groups"])))


def _fused(fn: Any, a: TensorArg, b: TensorArg, out: TensorArg, geom: Any) -> bool:
    """One of csrc/nn_conv.c's fused kernels; False where it does not apply (numpy's BLAS not attached)."""
    got = fn[out.dtype.name](ptr(a), ptr(b), ptr(out), geom)
    if got == 0:
        raise OutOfMemory(f"conv2d: no memory for the column buffers of a {out.shape} result; "
                          "use a smaller batch or image")
    return bool(got > 0)


def _chunk(n: int, per_sample: int) -> int:
    return max(1, min(n, CHUNK_ELEMENTS // max(per_sample, 1)))


def _per_sample(og: int, k: int, hw: int) -> bool:
    """Whether one sample's product is below OpenBLAS's threading threshold (M*N*K <= 4 * 65536): then
    a batched matmul of per-sample products runs without any thread hand-offs. Larger products go
    through one channel-major GEMM over the whole chunk, so BLAS syncs its threads once per call instead
    of once per sample (which costs milliseconds each when the cores are shared)."""
    return og * k * hw <= PER_SAMPLE_MAX


class _Unfold:
    """The im2col path of one call, where the fused kernel does not apply: groups g, K = the column height,
    per-sample products? (small), samples per chunk (step), the elements and item size of one sample of the
    image side (x or its gradient), and the geometry of a chunk for im2col / col2im."""

    def __init__(self, result: TensorArg, image: TensorArg, w_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> None:
        self.n, self.o, ho, wo = result.shape
        self.hw = ho * wo
        self.g, self.k = int(attrs["groups"]), w_shape[1] * w_shape[2] * w_shape[3]
        self.small = _per_sample(self.o // self.g, self.k, self.hw)
        self.step = _chunk(self.n, self.g * self.k * self.hw)
        self.plane = image.shape[1] * image.shape[2] * image.shape[3]
        self.isz, self.dt, self.np_dt = image.buffer.itemsize, image.dtype.name, image.buffer.dtype
        self._geom = (image.shape, w_shape[2:], (ho, wo), attrs)

    def geom(self, nb: int) -> Any:
        """The geometry of a chunk of nb samples, in this call's column layout."""
        image_shape, k, out_hw, attrs = self._geom
        return _conv_geom(nb, image_shape, k, out_hw, attrs, 0 if self.small else 1)

    def chunks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """(n0, nb, the column buffer) of each chunk of samples [n0, n0 + nb)."""
        for n0 in range(0, self.n, self.step):
            nb = min(self.step, self.n - n0)
            yield n0, nb, _ws.get("cols", self.np_dt, nb * self.g * self.k * self.hw)


# the im2col path of one kernel: (its plan, the output, input 0, input 1)
UnfoldStep = Callable[[_Unfold, TensorArg, TensorArg, TensorArg], None]


def _fused_or_unfolded(fused: Any, roles: str) -> Callable[[UnfoldStep], Kernel]:
    """The kernel that runs csrc/nn_conv.c's fused kernel `fused`, or where it does not apply (numpy's BLAS
    not attached) the decorated im2col path. `roles` says what (the output, input 0, input 1) are: r the
    conv's [N, O, Ho, Wo] side (y or its gradient), i its [N, C, H, W] side (x or its gradient), w the weight
    (or its gradient)."""
    ri, ii, wi = roles.index("r"), roles.index("i"), roles.index("w")

    def wrap(step: UnfoldStep) -> Kernel:
        def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
            out, (a, b) = outputs[0], inputs
            if out.numel == 0:
                return
            sides = (out, a, b)
            result, image, w_shape = sides[ri], sides[ii], sides[wi].shape
            n, o, ho, wo = result.shape
            if not _fused(fused, a, b, out, _conv_geom(n, image.shape, w_shape[2:], (ho, wo), attrs, 0, o)):
                step(_Unfold(result, image, w_shape, attrs), out, a, b)
        kernel.__name__ = kernel.__qualname__ = step.__name__
        return kernel
    return wrap


@_fused_or_unfolded(_FUSED, "riw")
def conv2d(u: _Unfold, y: TensorArg, x: TensorArg, w: TensorArg) -> None:
    g, o, k, hw = u.g, u.o, u.k, u.hw
    wv = view(w).reshape(g, o // g, k)
    for n0, nb, cols in u.chunks():
        _IM2COL[u.dt](ptr(x) + n0 * u.plane * u.isz, _from_buffer(cols), u.geom(nb))
        if u.small:  # [nb, g, K, HW] -> y[n0:n0+nb] viewed [nb, g, O/g, HW]
            gemm(wv, cols.reshape(nb, g, k, hw), view(y)[n0:n0 + nb].reshape(nb, g, o // g, hw))
            continue
        prod = _ws.get("prod", u.np_dt, o * nb * hw)
        gemm(wv, cols.reshape(g, k, nb * hw), prod.reshape(g, o // g, nb * hw))
        _TO_NCHW[u.dt](_from_buffer(prod), ptr(y) + n0 * o * hw * u.isz, nb, o, hw)


def conv2d_bias(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """conv2d plus a per-channel bias, added in the fused kernel's epilogue (each band of output rows right
    after its GEMM, while it is in cache): bit-identical to conv2d followed by a broadcast add."""
    y, (x, w, b) = outputs[0], inputs
    if y.numel == 0:
        return
    n, o, ho, wo = y.shape
    geom = _conv_geom(n, x.shape, w.shape[2:], (ho, wo), attrs, 0, o)
    got = _FUSED_BIAS[y.dtype.name](ptr(x), ptr(w), ptr(b), ptr(y), geom)
    if got == 0:
        raise OutOfMemory(f"conv2d: no memory for the column buffers of a {y.shape} result; "
                          "use a smaller batch or image")
    if got < 0:  # numpy's BLAS not attached: the im2col path, then the bias as the same single additions
        conv2d(outputs, inputs[:2], attrs)
        yv = view(y)
        yv += view(b).reshape(1, o, 1, 1)


@_fused_or_unfolded(_FUSED_BI, "irw")
def conv2d_backward_input(u: _Unfold, gx: TensorArg, gy: TensorArg, w: TensorArg) -> None:
    g, o, k, hw = u.g, u.o, u.k, u.hw
    wt = view(w).reshape(g, o // g, k).transpose(0, 2, 1)
    for n0, nb, cols in u.chunks():
        if u.small:
            gemm(wt, view(gy)[n0:n0 + nb].reshape(nb, g, o // g, hw), cols.reshape(nb, g, k, hw))
        else:
            gt = _ws.get("prod", u.np_dt, o * nb * hw)
            _FROM_NCHW[u.dt](ptr(gy) + n0 * o * hw * u.isz, _from_buffer(gt), nb, o, hw)
            gemm(wt, gt.reshape(g, o // g, nb * hw), cols.reshape(g, k, nb * hw))
        _COL2IM[u.dt](_from_buffer(cols), ptr(gx) + n0 * u.plane * u.isz, u.geom(nb))


@_fused_or_unfolded(_FUSED_BW, "wri")
def conv2d_backward_weight(u: _Unfold, gw: TensorArg, gy: TensorArg, x: TensorArg) -> None:
    g, o, k, hw = u.g, u.o, u.k, u.hw
    out = view(gw).reshape(-1)
    out[...] = 0
    u.step = min(u.step, _chunk(u.n, o * k)) if u.small else u.step
    target = out.reshape(g, o // g, k)
    for n0, nb, cols in u.chunks():
        _IM2COL[u.dt](ptr(x) + n0 * u.plane * u.isz, _from_buffer(cols), u.geom(nb))
        if u.small:  # one [O/g, HW] @ [HW, K] product per sample and group, summed over the samples
            per = _ws.get("prod", u.np_dt, nb * o * k)
            gemm(view(gy)[n0:n0 + nb].reshape(nb, g, o // g, hw), cols.reshape(nb, g, k, hw).transpose(0, 1, 3, 2),
                 per.reshape(nb, g, o // g, k))
            out += per.reshape(nb, o * k).sum(axis=0)
            continue
        gt = _ws.get("prod", u.np_dt, o * nb * hw)
        _FROM_NCHW[u.dt](ptr(gy) + n0 * o * hw * u.isz, _from_buffer(gt), nb, o, hw)
        colsT = cols.reshape(g, k, nb * hw).transpose(0, 2, 1)
        if n0 == 0:
            gemm(gt.reshape(g, o // g, nb * hw), colsT, target)
        else:
            target += gemm(gt.reshape(g, o // g, nb * hw), colsT, np.empty(target.shape, target.dtype))


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


# every kernel is named after its op
KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    (k.__name__, k, FLOAT) for k in (conv2d, conv2d_bias, conv2d_backward_input, conv2d_backward_weight,
                                    max_pool2d, max_pool2d_backward, avg_pool2d, avg_pool2d_backward)]

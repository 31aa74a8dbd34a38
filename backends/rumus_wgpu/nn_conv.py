"""conv2d and its two backward ops as im2col / col2im (shaders/nn_conv.wgsl) around the tiled GEMM
of gemm.py: batched, grouped, strided, padded and dilated, a few dispatches per call.

The column buffer (pooled scratch) holds, per group, K = C/groups * kh * kw rows of L = Ho * Wo
output positions, in one of two layouts:
  per sample     [N, groups, K, L]: one batched GEMM of [O/g, K] @ [K, L] products over (sample,
                 group) that reads and writes NCHW directly; used when L is large (or N = 1);
  channel-major  [groups, K, N * L]: one [O/g, K] @ [K, N * L] GEMM per group, so small images
                 still make wide GEMMs; NCHW <-> [groups, O/g, N * L] reorders are strided copies.
conv2d and conv2d_backward_input with a small weight are implicit GEMMs (nn_conv_implicit.py), and
conv2d_backward_weight with a small gradient a split sum (nn_conv_wgrad.py). Otherwise the weight
gradient always takes the channel-major layout: its GEMM then sums over samples and positions at once.
Large batches run in chunks of samples, so scratch stays within SCRATCH_BYTES (chunks of the weight
gradient are added up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from . import elementwise, nn_conv_implicit, nn_conv_wgrad
from .conv_config import config_words
from .gemm import matmul
from .layout import new_buffer, readable_inputs
from .nn_common import dispatch

SCRATCH_BYTES = 64 << 20
MAX_COLUMNS = 1 << 20     # N * L of one chunk: GEMM grids stay far below the dispatch limit
PER_SAMPLE_MIN_L = 256    # output positions from which per-sample GEMMs are wide enough
INCLUDE = ("grid", "exact_div", "conv_config")  # the launch (each kernel is a `run`), window inversion, uniform
_ADD = elementwise.spec("add")


def _view(buf: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, dtype: DType) -> TensorArg:
    return TensorArg(buf, shape, strides, offset, dtype)


class _Conv:
    """The geometry of one convolution: x [N, C, H, W], weight [O, C/g, kh, kw], output [N, O, Ho, Wo]."""

    def __init__(self, x_shape: Sequence[int], w_shape: Sequence[int], out_hw: Sequence[int],
                 attrs: Mapping[str, Any]) -> None:
        self.n, self.c, self.h, self.w = (int(v) for v in x_shape)
        self.o, self.kh, self.kw = int(w_shape[0]), int(w_shape[2]), int(w_shape[3])
        self.ho, self.wo = int(out_hw[0]), int(out_hw[1])
        self.g = int(attrs["groups"])
        self.og, self.k = self.o // self.g, int(w_shape[1]) * self.kh * self.kw
        self.L = self.ho * self.wo
        self.rows = self.g * self.k
        self.geo = [self.c, self.h, self.w, self.kh, self.kw, *attrs["stride"], *attrs["padding"], *attrs["dilation"],
                    self.ho, self.wo]

    def per_sample(self) -> bool:
        return self.n == 1 or self.L >= PER_SAMPLE_MIN_L

    def chunk(self, dev: Any, dtype: DType, extra: int) -> int:
        """Samples per chunk: the column buffer plus `extra` elements per sample within SCRATCH_BYTES."""
        per = (self.rows * self.L + extra) * dtype.itemsize
        cap = min(int(dev.max_binding), SCRATCH_BYTES)
        return max(1, min(self.n, cap // max(per, 1), MAX_COLUMNS // self.L))

    def column_chunks(self, dev: Any, dtype: DType, extra: int, label: str) -> Iterator[tuple[int, int, Any]]:
        """(n0, nb, a new column buffer) for each chunk of samples [n0, n0 + nb) (see `chunk`)."""
        step = self.chunk(dev, dtype, extra)
        for n0 in range(0, self.n, step):
            nb = min(step, self.n - n0)
            yield n0, nb, new_buffer(dev, nb * self.rows * self.L * dtype.itemsize, f"{label} columns")

    def strides(self, nb: int, per_sample: bool) -> tuple[int, int]:
        """(sample, row) strides of the column buffer."""
        return (self.rows * self.L, self.L) if per_sample else (self.L, nb * self.L)

    def _run(self, dev: Any, kernel: str, image: TensorArg, buffers: list[Any], n0: int, nb: int, per_sample: bool,
             count: int) -> None:
        """One of the column kernels (shaders/nn_conv.wgsl) for samples [n0, n0 + nb) of `image`."""
        sn, sr = self.strides(nb, per_sample)
        dispatch(dev, "nn_conv", kernel, image.dtype, buffers,
                 config_words(self, sn=sn, sr=sr, a_off=image.offset + n0 * self.c * self.h * self.w), count,
                 include=INCLUDE)

    def im2col(self, dev: Any, cols: Any, x: TensorArg, n0: int, nb: int, per_sample: bool) -> None:
        self._run(dev, "im2col", x, [cols, x.buffer], n0, nb, per_sample, nb * self.rows * self.ho)

    def col2im(self, dev: Any, gx: TensorArg, cols: Any, n0: int, nb: int, per_sample: bool) -> None:
        self._run(dev, "col2im", gx, [gx.buffer, cols], n0, nb, per_sample, nb * self.c * self.h * self.w)

    def nchw(self, t: TensorArg, n0: int, nb: int) -> TensorArg:
        """Samples [n0, n0 + nb) of a contiguous [N, O, Ho, Wo] tensor as [nb, g, O/g, L]."""
        o, og, L = self.o, self.og, self.L
        return _view(t.buffer, (nb, self.g, og, L), (o * L, og * L, L, 1), t.offset + n0 * o * L, t.dtype)

    def grouped(self, buf: Any, nb: int, dtype: DType) -> TensorArg:
        """A channel-major [g, O/g, nb * L] buffer seen as [nb, g, O/g, L] (the copy partner of nchw)."""
        og, L = self.og, self.L
        return _view(buf, (nb, self.g, og, L), (L, og * nb * L, nb * L, 1), 0, dtype)


def _copy(dst: TensorArg, src: TensorArg) -> None:
    elementwise.copy([dst], [src], {"dtype": None})


# the work of one chunk of samples [n0, n0 + nb) on the im2col path, given its column buffer:
# (dev, cv, the output, the image-side input, the weight, n0, nb, cols, per-sample layout?)
ChunkStep = Callable[[Any, _Conv, TensorArg, TensorArg, TensorArg, int, int, Any, bool], None]


def _im2col_kernel(label: str, input_grad: bool, step: ChunkStep) -> Kernel:
    """conv2d (input_grad False) or conv2d_backward_input: the implicit GEMM where it suits, else `step` for
    each chunk of samples with its column buffer."""
    implicit = nn_conv_implicit.backward_input if input_grad else nn_conv_implicit.forward

    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        out = outputs[0]
        if out.numel == 0:
            return
        dev, (a, w) = readable_inputs(outputs, inputs)
        image, result = (out, a) if input_grad else (a, out)
        cv = _Conv(image.shape, w.shape, result.shape[2:], attrs)
        if nn_conv_implicit.suits(dev, cv, input_grad=input_grad):
            implicit(dev, cv, out, a, w)
            return
        per_sample = cv.per_sample()
        for n0, nb, cols in cv.column_chunks(dev, a.dtype, 0 if per_sample else cv.o * cv.L, label):
            step(dev, cv, out, a, w, n0, nb, cols, per_sample)
    kernel.__name__ = kernel.__qualname__ = label
    return kernel


def _forward_chunk(dev: Any, cv: _Conv, y: TensorArg, x: TensorArg, w: TensorArg, n0: int, nb: int, cols: Any,
                   per_sample: bool) -> None:
    g, og, k, L, dt = cv.g, cv.og, cv.k, cv.L, x.dtype
    cv.im2col(dev, cols, x, n0, nb, per_sample)
    if per_sample:
        a = _view(w.buffer, (1, g, og, k), (0, og * k, k, 1), w.offset, dt)
        b = _view(cols, (nb, g, k, L), (g * k * L, k * L, L, 1), 0, dt)
        matmul([cv.nchw(y, n0, nb)], [a, b], {})
        return
    prod = new_buffer(dev, nb * cv.o * L * dt.itemsize, "conv2d product")
    a = _view(w.buffer, (g, og, k), (og * k, k, 1), w.offset, dt)
    b = _view(cols, (g, k, nb * L), (k * nb * L, nb * L, 1), 0, dt)
    matmul([_view(prod, (g, og, nb * L), (og * nb * L, nb * L, 1), 0, dt)], [a, b], {})
    _copy(cv.nchw(y, n0, nb), cv.grouped(prod, nb, dt))


def _input_grad_chunk(dev: Any, cv: _Conv, gx: TensorArg, gy: TensorArg, w: TensorArg, n0: int, nb: int, cols: Any,
                      per_sample: bool) -> None:
    g, og, k, L, dt = cv.g, cv.og, cv.k, cv.L, gy.dtype
    if per_sample:  # cols[n, g] = w[g]^T @ gy[n, g]
        a = _view(w.buffer, (1, g, k, og), (0, og * k, 1, k), w.offset, dt)
        c = _view(cols, (nb, g, k, L), (g * k * L, k * L, L, 1), 0, dt)
        matmul([c], [a, cv.nchw(gy, n0, nb)], {})
    else:
        gt = new_buffer(dev, nb * cv.o * L * dt.itemsize, "conv2d_backward_input grad reorder")
        _copy(cv.grouped(gt, nb, dt), cv.nchw(gy, n0, nb))
        a = _view(w.buffer, (g, k, og), (og * k, 1, k), w.offset, dt)
        b = _view(gt, (g, og, nb * L), (og * nb * L, nb * L, 1), 0, dt)
        matmul([_view(cols, (g, k, nb * L), (k * nb * L, nb * L, 1), 0, dt)], [a, b], {})
    cv.col2im(dev, gx, cols, n0, nb, per_sample)


conv2d = _im2col_kernel("conv2d", False, _forward_chunk)
conv2d_backward_input = _im2col_kernel("conv2d_backward_input", True, _input_grad_chunk)


def conv2d_backward_weight(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                           attrs: Mapping[str, Any]) -> None:
    gw, (gy, x) = outputs[0], inputs
    if gw.numel == 0:
        return
    if x.numel == 0 or gy.numel == 0:
        elementwise.fill([gw], [], {"value": 0.0})
        return
    dev, (gy, x) = readable_inputs(outputs, inputs)
    cv, dt = _Conv(x.shape, gw.shape, gy.shape[2:], attrs), x.dtype
    g, og, k, L = cv.g, cv.og, cv.k, cv.L
    if nn_conv_wgrad.suits(dev, cv):
        nn_conv_wgrad.backward_weight(dev, cv, gw, gy, x)
        return
    target = _view(gw.buffer, (g, og, k), (og * k, k, 1), gw.offset, dt)
    for n0, nb, cols in cv.column_chunks(dev, dt, cv.o * L, "conv2d_backward_weight"):
        cv.im2col(dev, cols, x, n0, nb, False)
        if nb == 1:  # one sample: gy[n] is already [g, O/g, L]
            a = _view(gy.buffer, (g, og, L), (og * L, L, 1), gy.offset + n0 * cv.o * L, dt)
        else:
            gt = new_buffer(dev, nb * cv.o * L * dt.itemsize, "conv2d_backward_weight grad reorder")
            _copy(cv.grouped(gt, nb, dt), cv.nchw(gy, n0, nb))
            a = _view(gt, (g, og, nb * L), (og * nb * L, nb * L, 1), 0, dt)
        b = _view(cols, (g, nb * L, k), (k * nb * L, 1, nb * L), 0, dt)  # cols[g]^T
        if n0 == 0:
            matmul([target], [a, b], {})
            continue
        part = _view(new_buffer(dev, gw.numel * dt.itemsize, "conv2d_backward_weight chunk"), (g, og, k),
                     (og * k, k, 1), 0, dt)
        matmul([part], [a, b], {})
        elementwise.run_map(_ADD, [target], [target, part])


def kernels() -> dict[str, Any]:
    return {"conv2d": conv2d, "conv2d_backward_input": conv2d_backward_input,
            "conv2d_backward_weight": conv2d_backward_weight}

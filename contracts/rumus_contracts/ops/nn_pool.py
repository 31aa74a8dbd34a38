"""2-D pooling over [N, C, H, W] (PyTorch's window, padding and ceil_mode rules).

    max_pool2d(x)                      -> y   (one output: the max of each window)
    max_pool2d_backward(grad, x)       -> gx  (each window's gradient goes to its first maximum, found again
                                               from x, so no indices tensor is kept between the passes)
    avg_pool2d(x)                      -> y
    avg_pool2d_backward(grad)          -> gx  (the adjoint of avg_pool2d; differentiable: its own adjoint
                                               is avg_pool2d again)
    adaptive_avg_pool2d(x)             -> y   (composite: two matmuls with constant averaging matrices)

Attributes reaching a kernel are normalized pairs (kernel_size, stride, padding, dilation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from .nn_conv import pair

MAX_ATTRS: dict[str, Any] = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1),
                             "ceil_mode": False}
AVG_ATTRS: dict[str, Any] = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "ceil_mode": False,
                             "count_include_pad": True, "divisor_override": None}


def pool_out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling_output_shape: in ceil mode the last window must start inside the padded input."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def pool_output_shape(op: str, x: Shape, attrs: Mapping[str, Any]) -> Shape:
    if len(x) != 4:
        raise ShapeError(f"{op}: input must be 4-D [N, C, H, W], got shape {tuple(x)}")
    kh, kw = pair(op, "kernel_size", attrs["kernel_size"], 1)
    sh, sw = pair(op, "stride", attrs["stride"], 1)
    ph, pw = pair(op, "padding", attrs["padding"], 0)
    dh, dw = pair(op, "dilation", attrs.get("dilation", (1, 1)), 1)
    if ph > kh // 2 or pw > kw // 2:
        raise ShapeError(f"{op}: padding {(ph, pw)} must be at most half the kernel size {(kh, kw)}")
    ho = pool_out_size(x[2], kh, sh, ph, dh, bool(attrs["ceil_mode"]))
    wo = pool_out_size(x[3], kw, sw, pw, dw, bool(attrs["ceil_mode"]))
    if ho < 1 or wo < 1:
        raise ShapeError(f"{op}: input {tuple(x)} is too small for kernel {(kh, kw)} with padding {(ph, pw)} "
                         f"and dilation {(dh, dw)} (output would be {(ho, wo)})")
    return (x[0], x[1], ho, wo)


def _pool_shape(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        return [pool_output_shape(op, tuple(shapes[0]), attrs)]
    return rule


def _check_divisor(op: str, attrs: Mapping[str, Any]) -> None:
    div = attrs["divisor_override"]
    if div is not None and int(div) <= 0:
        raise ShapeError(f"{op}: divisor_override must be a positive int or None, got {div!r}")


def _avg_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    _check_divisor("avg_pool2d", attrs)
    return [pool_output_shape("avg_pool2d", tuple(shapes[0]), attrs)]


def _max_backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    g, x = tuple(shapes[0]), tuple(shapes[1])
    want = pool_output_shape("max_pool2d_backward", x, attrs)
    if g != want:
        raise ShapeError(f"max_pool2d_backward: grad of shape {g} does not match the pooled shape {want} of x {x}")
    return [x]


def _avg_backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    op = "avg_pool2d_backward"
    _check_divisor(op, attrs)
    g = tuple(shapes[0])
    if len(g) != 4:
        raise ShapeError(f"{op}: grad must be 4-D, got shape {g}")
    h, w = pair(op, "input_size", attrs["input_size"], 1)
    x = (g[0], g[1], h, w)
    want = pool_output_shape(op, x, attrs)
    if g != want:
        raise ShapeError(f"{op}: grad of shape {g} does not match the pooled shape {want} of an input {x}")
    return [x]


def _adaptive_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    x = tuple(shapes[0])
    if len(x) != 4:
        raise ShapeError(f"adaptive_avg_pool2d: input must be 4-D [N, C, H, W], got shape {x}")
    ho, wo = pair("adaptive_avg_pool2d", "output_size", attrs["output_size"], 1)
    if x[2] < 1 or x[3] < 1:
        raise ShapeError(f"adaptive_avg_pool2d: input {x} has an empty spatial dim")
    return [(x[0], x[1], ho, wo)]


# ---- float64 references: one window at a time -------------------------------------------------------

def _geometry(attrs: Mapping[str, Any]) -> tuple[int, ...]:
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    dh, dw = attrs.get("dilation", (1, 1))
    return kh, kw, sh, sw, ph, pw, dh, dw


def _max_windows(x: np.ndarray, attrs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(values, flat index into each H*W plane of the first maximum) for every output position."""
    n, c, ho, wo = pool_output_shape("max_pool2d", x.shape, attrs)
    kh, kw, sh, sw, ph, pw, dh, dw = _geometry(attrs)
    h, w = x.shape[2:]
    vals = np.full((n, c, ho, wo), -np.inf)
    idx = np.zeros((n, c, ho, wo), dtype=np.int64)
    for oh in range(ho):
        for ow in range(wo):
            for i in range(kh):
                ih = oh * sh - ph + i * dh
                if not 0 <= ih < h:
                    continue
                for j in range(kw):
                    iw = ow * sw - pw + j * dw
                    if not 0 <= iw < w:
                        continue
                    v = x[:, :, ih, iw]
                    better = (v > vals[:, :, oh, ow]) | np.isnan(v)
                    vals[:, :, oh, ow] = np.where(better, v, vals[:, :, oh, ow])
                    idx[:, :, oh, ow] = np.where(better, ih * w + iw, idx[:, :, oh, ow])
    return vals, idx


def max_pool2d_reference(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return _max_windows(x, attrs)[0]


def max_pool2d_backward_reference(grad: np.ndarray, x: np.ndarray, **attrs: Any) -> np.ndarray:
    _, idx = _max_windows(x, attrs)
    n, c, h, w = x.shape
    gx = np.zeros((n * c, h * w))
    rows = np.repeat(np.arange(n * c), idx[0, 0].size) if n * c else np.zeros(0, np.int64)
    np.add.at(gx, (rows, idx.reshape(-1)), grad.reshape(-1))
    return gx.reshape(n, c, h, w)


def _avg_windows(shape: Shape, attrs: Mapping[str, Any]) -> list[tuple[int, int, slice, slice, float]]:
    """(oh, ow, rows, cols, divisor) of every window (PyTorch's avg_pool2d divisor rules)."""
    _, _, ho, wo = pool_output_shape("avg_pool2d", shape, attrs)
    kh, kw, sh, sw, ph, pw, _, _ = _geometry(attrs)
    h, w = shape[2:]
    out = []
    for oh in range(ho):
        for ow in range(wo):
            h0, w0 = oh * sh - ph, ow * sw - pw
            h1, w1 = min(h0 + kh, h + ph), min(w0 + kw, w + pw)
            pool = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            if attrs["divisor_override"]:
                div = float(attrs["divisor_override"])
            else:
                div = float(pool if attrs["count_include_pad"] else (h1 - h0) * (w1 - w0))
            out.append((oh, ow, slice(h0, h1), slice(w0, w1), div))
    return out


def avg_pool2d_reference(x: np.ndarray, **attrs: Any) -> np.ndarray:
    n, c, ho, wo = pool_output_shape("avg_pool2d", x.shape, attrs)
    y = np.zeros((n, c, ho, wo))
    for oh, ow, rows, cols, div in _avg_windows(x.shape, attrs):
        y[:, :, oh, ow] = x[:, :, rows, cols].sum(axis=(2, 3)) / div
    return y


def avg_pool2d_backward_reference(grad: np.ndarray, input_size: Any, **attrs: Any) -> np.ndarray:
    shape = (grad.shape[0], grad.shape[1], *tuple(input_size))
    gx = np.zeros(shape)
    for oh, ow, rows, cols, div in _avg_windows(shape, attrs):
        gx[:, :, rows, cols] += (grad[:, :, oh, ow] / div)[:, :, None, None]
    return gx


def adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows: [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_avg_pool2d_reference(x: np.ndarray, output_size: Any) -> np.ndarray:
    ho, wo = output_size
    y = np.zeros((x.shape[0], x.shape[1], ho, wo))
    for i, (h0, h1) in enumerate(adaptive_bounds(x.shape[2], ho)):
        for j, (w0, w1) in enumerate(adaptive_bounds(x.shape[3], wo)):
            y[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return y


# ---- samples ------------------------------------------------------------------------------------------

MAX_CASES: tuple[tuple[Shape, dict[str, Any]], ...] = (
    ((2, 3, 6, 6), {}),
    ((2, 2, 7, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    ((1, 2, 9, 8), {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 0), "dilation": (2, 1)}),
    ((2, 1, 5, 5), {"kernel_size": (3, 3), "stride": (1, 1)}),
    ((3, 2, 1, 4), {"kernel_size": (1, 2), "stride": (1, 2)}),
    ((2, 2, 5, 7), {"kernel_size": (2, 3), "stride": (2, 2), "ceil_mode": True}),
    ((0, 2, 4, 4), {}),
)
AVG_CASES: tuple[tuple[Shape, dict[str, Any]], ...] = (
    ((2, 3, 6, 6), {}),
    ((2, 2, 7, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ((2, 2, 7, 5), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}),
    ((1, 2, 6, 7), {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    ((1, 2, 6, 7), {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
                    "count_include_pad": False}),
    ((2, 1, 5, 5), {"kernel_size": (2, 2), "stride": (1, 1), "divisor_override": 3}),
    ((3, 2, 1, 4), {"kernel_size": (1, 2), "stride": (1, 2)}),
    ((0, 2, 4, 4), {}),
)


def _distinct(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Distinct values 0.25 apart (exact in every float dtype): one maximum per window, so gradients
    are defined and finite differences with a tiny step never cross a tie."""
    n = int(np.prod(shape))
    out: np.ndarray = (rng.permutation(n).astype(np.float64) / 4.0 - n / 8.0).reshape(shape)
    return out


def _max_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([_distinct(rng, s)], {**MAX_ATTRS, **a}, name=f"{s} {a}") for s, a in MAX_CASES]


PoolCases = Sequence[tuple[Shape, Mapping[str, Any]]]


def max_pool_backward_samples(rng: np.random.Generator, cases: PoolCases, label: str = "") -> list[Sample]:
    """max_pool2d_backward samples (grad, distinct x) for (x shape, attrs) cases; plugins pass their own
    cases and a label that tells their samples from the core's."""
    out = []
    for s, a in cases:
        attrs = {**MAX_ATTRS, **a}
        g = pool_output_shape("max_pool2d", s, attrs)
        out.append(Sample([rng.uniform(-1, 1, g), _distinct(rng, s)], attrs, grad=False, name=f"{label}{s} {a}"))
    return out


def avg_pool_samples(rng: np.random.Generator, cases: PoolCases, label: str = "") -> list[Sample]:
    """avg_pool2d samples for (x shape, attrs) cases (see max_pool_backward_samples)."""
    return [Sample([rng.uniform(-2, 2, s)], {**AVG_ATTRS, **a}, name=f"{label}{s} {a}") for s, a in cases]


def avg_pool_backward_samples(rng: np.random.Generator, cases: PoolCases, label: str = "") -> list[Sample]:
    """avg_pool2d_backward samples (the pooled grad) for (x shape, attrs) cases (see max_pool_backward_samples)."""
    out = []
    for s, a in cases:
        attrs = {**AVG_ATTRS, **a}
        g = pool_output_shape("avg_pool2d", s, attrs)
        out.append(Sample([rng.uniform(-2, 2, g)], {**attrs, "input_size": s[2:]}, name=f"{label}{s} {a}"))
    return out


def _max_backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = max_pool_backward_samples(rng, MAX_CASES)
    # overlapping windows sharing a maximum: its gradient is the sum over those windows
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = 5.0
    out.append(Sample([rng.uniform(-1, 1, (1, 1, 3, 3)), x],
                      {**MAX_ATTRS, "kernel_size": (2, 2), "stride": (1, 1)}, grad=False, name="shared maximum"))
    return out


def _avg_samples(rng: np.random.Generator) -> list[Sample]:
    return avg_pool_samples(rng, AVG_CASES)


def _avg_backward_samples(rng: np.random.Generator) -> list[Sample]:
    return avg_pool_backward_samples(rng, AVG_CASES)


def _adaptive_samples(rng: np.random.Generator) -> list[Sample]:
    cases = (((2, 3, 7, 5), (3, 2)), ((2, 2, 6, 8), (3, 4)), ((2, 3, 5, 6), (1, 1)), ((1, 2, 5, 5), (5, 5)),
             ((2, 1, 3, 4), (5, 6)), ((0, 2, 4, 4), (2, 2)))
    return [Sample([rng.uniform(-2, 2, s)], {"output_size": o}, name=f"{s}->{o}") for s, o in cases]


def _max_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((2, 3, 5))], MAX_ATTRS, ShapeError, "4-D"),
            ErrorSample([z((1, 1, 4, 4))], {**MAX_ATTRS, "padding": (2, 2)}, ShapeError, "at most half"),
            ErrorSample([z((1, 1, 1, 4))], MAX_ATTRS, ShapeError, "too small")]


def _avg_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((1, 1, 1, 4))], AVG_ATTRS, ShapeError, "too small"),
            ErrorSample([z((1, 1, 4, 4))], {**AVG_ATTRS, "divisor_override": 0}, ShapeError, "divisor_override")]


def _backward_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((1, 2, 3, 3)), z((1, 2, 4, 4))], MAX_ATTRS, ShapeError, "does not match the pooled shape")]


def _avg_backward_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((1, 2, 3, 3))], {**AVG_ATTRS, "input_size": (4, 4)}, ShapeError,
                        "does not match the pooled shape")]


def _adaptive_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((2, 4, 4))], {"output_size": (2, 2)}, ShapeError, "4-D"),
            ErrorSample([z((1, 2, 4, 4))], {"output_size": (0, 2)}, ShapeError, "output_size")]


def register(registry: OpRegistry) -> None:
    fl: dict[str, Any] = {"dtypes": FLOAT_DTYPES}
    registry.register(OpSchema(
        "max_pool2d", ("x",), _pool_shape("max_pool2d"), attrs=dict(MAX_ATTRS), contiguous=("x",),
        differentiable=("x",), reference=max_pool2d_reference, samples=_max_samples, error_samples=_max_errors,
        doc="max over each (dilated) window of x [N,C,H,W]; padding never wins (it counts as -inf); NaN wins", **fl))
    registry.register(OpSchema(
        "max_pool2d_backward", ("grad", "x"), _max_backward_shape, attrs=dict(MAX_ATTRS),
        contiguous=("grad", "x"), reference=max_pool2d_backward_reference, samples=_max_backward_samples,
        error_samples=_backward_errors,
        doc="gradient of max_pool2d: each window's grad is added at its first maximum (row-major), found again "
            "from x", **fl))
    registry.register(OpSchema(
        "avg_pool2d", ("x",), _avg_shape, attrs=dict(AVG_ATTRS), contiguous=("x",), differentiable=("x",),
        reference=avg_pool2d_reference, samples=_avg_samples, error_samples=_avg_errors,
        doc="mean over each window of x [N,C,H,W] (count_include_pad, divisor_override and ceil_mode as in "
            "PyTorch)", **fl))
    registry.register(OpSchema(
        "avg_pool2d_backward", ("grad",), _avg_backward_shape, attrs={**AVG_ATTRS, "input_size": (1, 1)},
        contiguous=("grad",), differentiable=("grad",), reference=avg_pool2d_backward_reference,
        samples=_avg_backward_samples, error_samples=_avg_backward_errors,
        doc="gradient of avg_pool2d (its adjoint): grad [N,C,Ho,Wo] -> [N,C,H,W] with (H, W) = input_size", **fl))
    registry.register(OpSchema(
        "adaptive_avg_pool2d", ("x",), _adaptive_shape, attrs={"output_size": (1, 1)}, differentiable=("x",),
        composite=True, reference=adaptive_avg_pool2d_reference, samples=_adaptive_samples,
        error_samples=_adaptive_errors, tolerance={"float16": (5e-3, 1e-3), "bfloat16": (4e-2, 8e-3)},
        tolerance_reason="float16: the uneven-window path multiplies by float16-rounded averaging matrices "
                         "(1/3 has no exact float16) and rounds the intermediate product (bfloat16: 8x coarser)",
        doc="mean over PyTorch's adaptive windows [floor(i*H/Ho), ceil((i+1)*H/Ho)); a composite of mean, "
            "avg_pool2d (evenly divisible sizes) or two matmuls with averaging matrices", **fl))

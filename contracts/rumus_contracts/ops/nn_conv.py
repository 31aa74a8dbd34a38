"""2-D convolution as three kernels closed under differentiation, plus the transposed convolution.

    conv2d(x [N,C,H,W], weight [O,C/groups,kh,kw])        -> y  [N,O,Ho,Wo]
    conv2d_backward_input(grad [N,O,Ho,Wo], weight)       -> gx [N,C,H,W]    (attr input_size = (H, W))
    conv2d_backward_weight(grad [N,O,Ho,Wo], x)           -> gw [O,C/g,kh,kw] (attr kernel_size = (kh, kw))

    conv2d_bias(x, weight, bias [O])                      -> conv2d(x, weight) + bias per output channel

`conv2d_backward_input` is the adjoint of conv2d in x and `conv2d_backward_weight` its adjoint in the
weight; each one's derivatives are again one of the three, so every backend gets first and second
derivatives from these three kernels. `conv_transpose2d` is `conv2d_backward_input` with the output
size worked out from output_padding (a composite: no kernel of its own). `conv2d_bias` is a composite (conv2d,
then add) that a backend may replace with a fused kernel adding the bias in its convolution's epilogue.

Attributes reaching a kernel are normalized pairs of ints: stride >= 1, padding >= 0 (symmetric; the
core builds padding="same" with an even kernel from a symmetric conv and a slice), dilation >= 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape

CONV_ATTRS: dict[str, Any] = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
TOLERANCE = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}
TOLERANCE_REASON = "each output sums C/groups*kh*kw products (a GEMM on CPU): rounding grows with that count"


def pair(op: str, name: str, value: Any, least: int) -> tuple[int, int]:
    """A (h, w) pair of ints >= least; ShapeError naming the op otherwise."""
    try:
        a, b = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: {name} must be a pair of ints, got {value!r}") from None
    if a < least or b < least:
        raise ShapeError(f"{op}: {name} must be >= {least}, got {(a, b)}")
    return a, b


def out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    """Output length of a convolution / pooling window sweep (floor mode)."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _geometry(op: str, attrs: Mapping[str, Any]) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], int]:
    stride = pair(op, "stride", attrs["stride"], 1)
    padding = pair(op, "padding", attrs["padding"], 0)
    dilation = pair(op, "dilation", attrs["dilation"], 1)
    groups = int(attrs["groups"])
    if groups < 1:
        raise ShapeError(f"{op}: groups must be >= 1, got {groups}")
    return stride, padding, dilation, groups


def _check_4d(op: str, what: str, shape: Shape) -> None:
    if len(shape) != 4:
        raise ShapeError(f"{op}: {what} must be 4-D, got shape {tuple(shape)} (add a batch dim with unsqueeze(0))")


def conv_output_shape(op: str, x: Shape, w: Shape, attrs: Mapping[str, Any]) -> Shape:
    """[N, O, Ho, Wo] of conv2d(x, w); checks channels, groups and that the kernel fits."""
    _check_4d(op, "input", x)
    _check_4d(op, "weight", w)
    (sh, sw), (ph, pw), (dh, dw), g = _geometry(op, attrs)
    n, c, h, wd = x
    o, cg, kh, kw = w
    if o % g or c != cg * g or min(kh, kw, cg) < 1:
        raise ShapeError(f"{op}: input {tuple(x)} with {c} channels does not fit weight {tuple(w)} with groups={g} "
                         f"(expected weight [out_channels divisible by {g}, {c // g if c % g == 0 else '?'}, kh, kw])")
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(wd, kw, sw, pw, dw)
    if ho < 1 or wo < 1:
        raise ShapeError(f"{op}: the input's spatial size {(h, wd)} (padded by {(ph, pw)}) is smaller than the "
                         f"dilated kernel {(dh * (kh - 1) + 1, dw * (kw - 1) + 1)}")
    return (n, o, ho, wo)


def _conv2d_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    return [conv_output_shape("conv2d", tuple(shapes[0]), tuple(shapes[1]), attrs)]


def _conv2d_bias_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    out = conv_output_shape("conv2d_bias", tuple(shapes[0]), tuple(shapes[1]), attrs)
    if tuple(shapes[2]) != (out[1],):
        raise ShapeError(f"conv2d_bias: bias of shape {tuple(shapes[2])} does not fit weight {tuple(shapes[1])}: "
                         f"expected one value per output channel, shape ({out[1]},)")
    return [out]


def _two_4d(op: str, shapes: Sequence[Shape], first: str, second: str) -> tuple[Shape, Shape]:
    """shapes[0] and shapes[1] as tuples, each checked 4-D (named `first` and `second` in the error)."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    _check_4d(op, first, a)
    _check_4d(op, second, b)
    return a, b


def _check_grad_fits(op: str, g: Shape, x: Shape, w: Shape, attrs: Mapping[str, Any]) -> None:
    """A backward op's grad g must be the shape conv2d(x, w) gives."""
    expect = conv_output_shape(op, x, w, attrs)
    if expect != g:
        raise ShapeError(f"{op}: grad of shape {g} does not come from a conv2d of input {x} with weight {w} "
                         f"(that gives {expect})")


def _backward_input_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    op = "conv2d_backward_input"
    g, w = _two_4d(op, shapes, "grad", "weight")
    h, wd = pair(op, "input_size", attrs["input_size"], 1)
    x = (g[0], w[1] * int(attrs["groups"]), h, wd)
    _check_grad_fits(op, g, x, w, attrs)
    return [x]


def _backward_weight_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    op = "conv2d_backward_weight"
    g, x = _two_4d(op, shapes, "grad", "input")
    kh, kw = pair(op, "kernel_size", attrs["kernel_size"], 1)
    groups = int(attrs["groups"])
    if groups < 1 or x[1] % groups:
        raise ShapeError(f"{op}: input channels {x[1]} are not divisible by groups={groups}")
    w = (g[1], x[1] // groups, kh, kw)
    _check_grad_fits(op, g, x, w, attrs)
    return [w]


def transpose_output_size(size: int, k: int, s: int, p: int, d: int, op_: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + op_ + 1


def _conv_transpose_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    op = "conv_transpose2d"
    x, w = _two_4d(op, shapes, "input", "weight")
    (sh, sw), (ph, pw), (dh, dw), g = _geometry(op, attrs)
    oph, opw = pair(op, "output_padding", attrs["output_padding"], 0)
    if oph >= sh or opw >= sw:  # PyTorch also allows output_padding < dilation; those rows get no input
        raise ShapeError(f"{op}: output_padding {(oph, opw)} must be smaller than stride {(sh, sw)}")
    if x[1] != w[0] or w[0] % g:
        raise ShapeError(f"{op}: input {x} with {x[1]} channels does not fit weight {w} "
                         f"(expected [in_channels divisible by groups={g}, out_channels/groups, kh, kw])")
    h = transpose_output_size(x[2], w[2], sh, ph, dh, oph)
    wd = transpose_output_size(x[3], w[3], sw, pw, dw, opw)
    if h < 1 or wd < 1:
        raise ShapeError(f"{op}: input {x} with padding {(ph, pw)} gives an empty output {(h, wd)}")
    return [(x[0], w[1] * g, h, wd)]


# ---- float64 references: explicit loops over kernel offsets on the padded input -----------------

def _window(a: np.ndarray, i: int, j: int, ho: int, wo: int, attrs: Mapping[str, Any]) -> Any:
    """a[..., rows, cols] touched by kernel offset (i, j) for every output position (a is padded)."""
    (sh, sw), (dh, dw) = attrs["stride"], attrs["dilation"]
    return (..., slice(i * dh, i * dh + sh * (ho - 1) + 1, sh), slice(j * dw, j * dw + sw * (wo - 1) + 1, sw))


def _padded_groups(x: np.ndarray, g: int, ph: int, pw: int) -> np.ndarray:
    """x [N, C, H, W] zero-padded by (ph, pw) with its channels split into g groups: [N, g, C/g, H', W']."""
    n, c, h, w = x.shape
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))).reshape(n, g, c // g, h + 2 * ph, w + 2 * pw)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: Any = (1, 1), padding: Any = (0, 0),
                     dilation: Any = (1, 1), groups: int = 1) -> np.ndarray:
    attrs = _attrs(tuple(stride), tuple(padding), tuple(dilation), groups)
    n, o, ho, wo = conv_output_shape("conv2d", x.shape, w.shape, attrs)
    ph, pw = attrs["padding"]
    g, cg = groups, w.shape[1]
    xp = _padded_groups(x, g, ph, pw)
    wg = w.reshape(g, o // g, cg, w.shape[2], w.shape[3])
    out = np.zeros((n, g, o // g, ho, wo))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            out += np.einsum("ngchw,goc->ngohw", xp[_window(xp, i, j, ho, wo, attrs)], wg[..., i, j])
    return out.reshape(n, o, ho, wo)


def conv2d_bias_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: Any = (1, 1), padding: Any = (0, 0),
                          dilation: Any = (1, 1), groups: int = 1) -> np.ndarray:
    out: np.ndarray = conv2d_reference(x, w, stride, padding, dilation, groups) + b.reshape(1, -1, 1, 1)
    return out


def conv2d_backward_input_reference(grad: np.ndarray, w: np.ndarray, input_size: Any, stride: Any = (1, 1),
                                    padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1) -> np.ndarray:
    attrs = _attrs(tuple(stride), tuple(padding), tuple(dilation), groups)
    n, o, ho, wo = grad.shape
    (h, wd), (ph, pw) = tuple(input_size), attrs["padding"]
    g, cg = groups, w.shape[1]
    gp = np.zeros((n, g, cg, h + 2 * ph, wd + 2 * pw))
    gg = grad.reshape(n, g, o // g, ho, wo)
    wg = w.reshape(g, o // g, cg, w.shape[2], w.shape[3])
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            gp[_window(gp, i, j, ho, wo, attrs)] += np.einsum("ngohw,goc->ngchw", gg, wg[..., i, j])
    return gp[..., ph:ph + h, pw:pw + wd].reshape(n, g * cg, h, wd)


def conv2d_backward_weight_reference(grad: np.ndarray, x: np.ndarray, kernel_size: Any, stride: Any = (1, 1),
                                     padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1) -> np.ndarray:
    attrs = _attrs(tuple(stride), tuple(padding), tuple(dilation), groups)
    n, o, ho, wo = grad.shape
    (kh, kw), (ph, pw) = tuple(kernel_size), attrs["padding"]
    g, cg = groups, x.shape[1] // groups
    xp = _padded_groups(x, g, ph, pw)
    gg = grad.reshape(n, g, o // g, ho, wo)
    out = np.zeros((g, o // g, cg, kh, kw))
    for i in range(kh):
        for j in range(kw):
            out[..., i, j] = np.einsum("ngohw,ngchw->goc", gg, xp[_window(xp, i, j, ho, wo, attrs)])
    return out.reshape(o, cg, kh, kw)


def conv_transpose2d_reference(x: np.ndarray, w: np.ndarray, stride: Any = (1, 1), padding: Any = (0, 0),
                               output_padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1) -> np.ndarray:
    attrs: dict[str, Any] = {"stride": stride, "padding": padding, "output_padding": output_padding,
                             "dilation": dilation, "groups": groups}
    (shape,) = _conv_transpose_shape([x.shape, w.shape], attrs)
    return conv2d_backward_input_reference(x, w, shape[2:], stride, padding, dilation, groups)


# ---- samples: batch > 1, strides, padding, dilation, groups, non-square, size-1 and size-0 dims -----

# (x shape, weight shape, stride, padding, dilation, groups)
CASES: tuple[tuple[Shape, Shape, tuple[int, int], tuple[int, int], tuple[int, int], int], ...] = (
    ((2, 3, 6, 7), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 4, 7, 5), (6, 2, 3, 2), (2, 1), (1, 0), (1, 1), 2),
    ((1, 2, 7, 8), (3, 2, 3, 3), (1, 1), (2, 2), (2, 2), 1),
    ((3, 2, 4, 5), (2, 2, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 5, 6), (6, 1, 3, 3), (2, 2), (1, 1), (1, 1), 3),
    ((2, 3, 4, 4), (2, 3, 4, 4), (1, 1), (0, 0), (1, 1), 1),
    ((2, 2, 1, 6), (3, 2, 1, 3), (1, 1), (0, 1), (1, 1), 1),
    ((2, 2, 8, 7), (2, 2, 2, 3), (3, 2), (1, 1), (1, 2), 1),
    ((0, 3, 5, 5), (2, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
)


def _attrs(stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> dict[str, Any]:
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def _name(xs: Shape, ws: Shape, attrs: Mapping[str, Any]) -> str:
    return f"x{xs} w{ws} s{attrs['stride']} p{attrs['padding']} d{attrs['dilation']} g{attrs['groups']}"


def _expanded_cases() -> list[tuple[Shape, Shape, dict[str, Any], Shape, str]]:
    """CASES as (x shape, weight shape, attrs, output shape, sample name), shared by the three conv ops."""
    out = []
    for xs, ws, s, p, d, g in CASES:
        a = _attrs(s, p, d, g)
        out.append((xs, ws, a, conv_output_shape("conv2d", xs, ws, a), _name(xs, ws, a)))
    return out


def _conv2d_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)], a, name=name)
            for xs, ws, a, _, name in _expanded_cases()]


def _conv2d_bias_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws), rng.uniform(-1, 1, ws[0])], a, name=name)
            for xs, ws, a, _, name in _expanded_cases()]


def _backward_input_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, gs), rng.uniform(-1, 1, ws)], {**a, "input_size": xs[2:]}, name=name)
            for xs, ws, a, gs, name in _expanded_cases()]


def _backward_weight_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample([rng.uniform(-1, 1, gs), rng.uniform(-1, 1, xs)], {**a, "kernel_size": ws[2:]}, name=name)
            for xs, ws, a, gs, name in _expanded_cases()]


def _conv_transpose_samples(rng: np.random.Generator) -> list[Sample]:
    cases: tuple[tuple[Shape, Shape, dict[str, Any]], ...] = (
        ((2, 3, 4, 5), (3, 2, 3, 3), {}),
        ((2, 4, 3, 4), (4, 1, 3, 2), {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "groups": 2}),
        ((1, 2, 3, 3), (2, 3, 2, 2), {"stride": (2, 2), "dilation": (2, 1), "output_padding": (1, 1)}),
        ((3, 2, 1, 5), (2, 2, 1, 3), {"padding": (0, 1)}),
    )
    out = []
    for xs, ws, a in cases:
        attrs = {"stride": (1, 1), "padding": (0, 0), "output_padding": (0, 0), "dilation": (1, 1), "groups": 1, **a}
        out.append(Sample([rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)], attrs, name=f"x{xs} w{ws} {a}"))
    return out


def _conv2d_errors() -> list[ErrorSample]:
    z = np.zeros
    return [
        ErrorSample([z((2, 3, 5, 5)), z((4, 2, 3, 3))], {}, ShapeError, "channels"),
        ErrorSample([z((2, 4, 5, 5)), z((3, 2, 3, 3))], {"groups": 2}, ShapeError, "groups=2"),
        ErrorSample([z((2, 3, 2, 2)), z((4, 3, 3, 3))], {}, ShapeError, "smaller than the dilated kernel"),
        ErrorSample([z((3, 5, 5)), z((4, 3, 3, 3))], {}, ShapeError, "4-D"),
        ErrorSample([z((2, 3, 5, 5)), z((4, 3, 3, 3))], {"stride": (0, 1)}, ShapeError, "stride"),
    ]


def _conv2d_bias_errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((2, 3, 5, 5)), z((4, 3, 3, 3)), z((3,))], {}, ShapeError, "one value per output channel"),
            ErrorSample([z((2, 3, 5, 5)), z((4, 2, 3, 3)), z((4,))], {}, ShapeError, "channels")]


def _backward_input_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((2, 4, 3, 3)), np.zeros((4, 3, 3, 3))], {"input_size": (6, 6)}, ShapeError,
                        "does not come from a conv2d")]


def _backward_weight_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((2, 4, 3, 3)), np.zeros((2, 3, 5, 5))], {"kernel_size": (2, 2)}, ShapeError,
                        "does not come from a conv2d"),
            ErrorSample([np.zeros((2, 4, 3, 3)), np.zeros((2, 3, 5, 5))], {"kernel_size": (3, 3), "groups": 2},
                        ShapeError, "divisible by groups=2")]


def _conv_transpose_errors() -> list[ErrorSample]:
    return [ErrorSample([np.zeros((2, 3, 4, 4)), np.zeros((2, 3, 3, 3))], {}, ShapeError, "does not fit weight"),
            ErrorSample([np.zeros((2, 3, 4, 4)), np.zeros((3, 3, 3, 3))], {"output_padding": (1, 1)}, ShapeError,
                        "output_padding")]


def register(registry: OpRegistry) -> None:
    common: dict[str, Any] = {"dtypes": FLOAT_DTYPES, "tolerance": TOLERANCE, "tolerance_reason": TOLERANCE_REASON}
    registry.register(OpSchema(
        "conv2d", ("x", "weight"), _conv2d_shape, autocast="lower", attrs=dict(CONV_ATTRS), contiguous=("x", "weight"),
        differentiable=("x", "weight"), reference=conv2d_reference, samples=_conv2d_samples,
        error_samples=_conv2d_errors,
        doc="2-D cross-correlation of x [N,C,H,W] with weight [O,C/groups,kh,kw] (PyTorch's conv2d without bias); "
            "symmetric zero padding", **common))
    registry.register(OpSchema(
        "conv2d_bias", ("x", "weight", "bias"), _conv2d_bias_shape, autocast="lower", attrs=dict(CONV_ATTRS),
        contiguous=("x", "weight", "bias"), differentiable=("x", "weight", "bias"), reference=conv2d_bias_reference,
        samples=_conv2d_bias_samples, error_samples=_conv2d_bias_errors, composite=True,
        doc="conv2d(x, weight) + bias[O] per output channel (PyTorch's conv2d with bias): a composite of conv2d "
            "and add, which a backend may replace with a fused kernel (the bias in its epilogue)", **common))
    registry.register(OpSchema(
        "conv2d_backward_input", ("grad", "weight"), _backward_input_shape,
        attrs={**CONV_ATTRS, "input_size": (1, 1)}, contiguous=("grad", "weight"),
        differentiable=("grad", "weight"), reference=conv2d_backward_input_reference,
        samples=_backward_input_samples, error_samples=_backward_input_errors,
        doc="the gradient of conv2d with respect to its input (the adjoint in x; the transposed convolution): "
            "grad [N,O,Ho,Wo], weight [O,C/groups,kh,kw] -> [N,C,H,W] with (H, W) = input_size", **common))
    registry.register(OpSchema(
        "conv2d_backward_weight", ("grad", "x"), _backward_weight_shape,
        attrs={**CONV_ATTRS, "kernel_size": (1, 1)}, contiguous=("grad", "x"), differentiable=("grad", "x"),
        reference=conv2d_backward_weight_reference, samples=_backward_weight_samples,
        error_samples=_backward_weight_errors,
        doc="the gradient of conv2d with respect to its weight: grad [N,O,Ho,Wo], x [N,C,H,W] -> "
            "[O,C/groups,kh,kw] with (kh, kw) = kernel_size", **common))
    registry.register(OpSchema(
        "conv_transpose2d", ("x", "weight"), _conv_transpose_shape, autocast="lower",
        attrs={"stride": (1, 1), "padding": (0, 0), "output_padding": (0, 0), "dilation": (1, 1), "groups": 1},
        differentiable=("x", "weight"), composite=True, reference=conv_transpose2d_reference,
        samples=_conv_transpose_samples, error_samples=_conv_transpose_errors,
        doc="transposed convolution (PyTorch's conv_transpose2d without bias): x [N,Cin,H,W], weight "
            "[Cin,Cout/groups,kh,kw]; conv2d_backward_input with the output size from output_padding", **common))

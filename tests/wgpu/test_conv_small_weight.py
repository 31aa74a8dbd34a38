"""Small-weight convolutions on wgpu. conv2d_backward_weight's split sum (backends/rumus_wgpu/nn_conv_wgrad.py):
chunks of (sample, position) summed in many workgroups, then added in a fixed order; conv2d's and
conv2d_backward_input's implicit GEMMs (nn_conv_implicit.py): the column gathered in workgroup memory, NCHW
written directly. Values against
float64 over strides, padding, dilation, groups, offsets and float16; many splits; the same bits on every
run; the same values as the im2col + GEMM path they replace; and the split plan's arithmetic.

The tests call the backend's kernel itself: with rumus-vision installed, its direct kernel takes convs of
one or two input channels per group in front of it (the lent GPU machine runs without the plugin)."""

import types

import numpy as np
import pytest

import rumus as rm
from rumus_contracts.ops.nn_conv import (conv2d_backward_input_reference, conv2d_backward_weight_reference,
                                         conv2d_reference)
from rumus_wgpu import nn_conv_wgrad
from rumus_wgpu.nn_conv import conv2d, conv2d_backward_input, conv2d_backward_weight
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(16)

# (N, C, H, W, O, (kh, kw), stride, padding, dilation, groups)
GEOMETRIES = [
    (8, 1, 28, 28, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1),     # the CNN's first conv: many splits
    (4, 16, 14, 14, 32, (3, 3), (1, 1), (1, 1), (1, 1), 1),    # its second: 18 tiles, 144 entries per channel
    (3, 6, 9, 7, 4, (3, 2), (2, 1), (1, 0), (1, 2), 2),
    (2, 4, 5, 5, 4, (3, 3), (1, 1), (1, 1), (1, 1), 4),        # depthwise
    (1, 3, 17, 19, 5, (5, 5), (2, 2), (2, 2), (2, 1), 1),
    (2, 20, 6, 6, 18, (1, 1), (1, 1), (0, 0), (1, 1), 1),      # tile edges in both directions
    (2, 3, 4, 4, 2, (7, 7), (1, 1), (3, 3), (1, 1), 1),        # kernel larger than the image
]


def _case(geo, dtype="float32"):
    n, c, h, w, o, (kh, kw), s, p, d, g = geo
    ho = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    wo = (w + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    x = RNG.standard_normal((n, c, h, w)).astype(dtype)
    gy = RNG.standard_normal((n, o, ho, wo)).astype(dtype)
    attrs = {"kernel_size": (kh, kw), "stride": s, "padding": p, "dilation": d, "groups": g}
    return gy, x, attrs


def _weight_grad_of(gy, x, attrs):
    """The wgpu backend's conv2d_backward_weight of two device tensors."""
    o, cg = gy.shape[1], x.shape[1] // attrs["groups"]
    out = rm.empty((o, cg, *attrs["kernel_size"]), dtype=x.dtype, device=DEVICE)
    conv2d_backward_weight([out._arg], [gy._arg, x._arg], attrs)
    return out.numpy()


def _weight_grad(gy, x, attrs, dtype="float32"):
    return _weight_grad_of(rm.tensor(gy, dtype=dtype, device=DEVICE), rm.tensor(x, dtype=dtype, device=DEVICE), attrs)


def _tolerance(gy, x, attrs, rel):
    """Per-element bound: rel times the sum of |products| of the element (the float64 reference on |inputs|)."""
    return rel * conv2d_backward_weight_reference(np.abs(gy).astype(np.float64), np.abs(x).astype(np.float64),
                                                  **attrs) + 1e-6


def _conv(x, w, attrs):
    """The wgpu backend's conv2d of two device tensors."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    (s0, s1), (p0, p1), (d0, d1) = attrs["stride"], attrs["padding"], attrs["dilation"]
    shape = (n, o, (h + 2 * p0 - d0 * (kh - 1) - 1) // s0 + 1, (wd + 2 * p1 - d1 * (kw - 1) - 1) // s1 + 1)
    out = rm.empty(shape, dtype=x.dtype, device=DEVICE)
    conv2d([out._arg], [x._arg, w._arg], {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")})
    return out.numpy()


def _forward_case(geo, dtype="float32"):
    _, x, attrs = _case(geo, dtype)
    n, c, h, w, o, (kh, kw), *_, g = geo
    return x, RNG.standard_normal((o, c // g, kh, kw)).astype(dtype), attrs


def _forward_tolerance(x, w, attrs, rel):
    a = {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    return rel * conv2d_reference(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), **a) + 1e-6


def _programs():
    return rm.tensor([0.0], device=DEVICE)._arg.buffer.dev.programs._cache


def test_the_small_weight_kernels_run():
    gy, x, attrs = _case(GEOMETRIES[0])
    _weight_grad(gy, x, attrs)
    x, w, attrs = _forward_case(GEOMETRIES[0])
    _conv(rm.tensor(x, device=DEVICE), rm.tensor(w, device=DEVICE), attrs)
    gy, _, _ = _case(GEOMETRIES[0])
    _input_grad(rm.tensor(gy, device=DEVICE), rm.tensor(w, device=DEVICE), x.shape, attrs)
    names = {k[1:3] for k in _programs() if isinstance(k, tuple) and k[:1] == ("nn",)}
    assert {("nn_conv_wgrad", "partials"), ("nn_conv_implicit", "forward"), ("nn_conv_implicit", "input")} <= names


def _input_grad(gy, w, x_shape, attrs):
    """The wgpu backend's conv2d_backward_input of two device tensors."""
    out = rm.empty(tuple(x_shape), dtype=gy.dtype, device=DEVICE)
    a = {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    conv2d_backward_input([out._arg], [gy._arg, w._arg], {**a, "input_size": tuple(x_shape[2:])})
    return out.numpy()


def _input_reference(gy, w, x_shape, attrs, magnitude=False):
    a = {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    f = np.abs if magnitude else np.asarray
    return conv2d_backward_input_reference(f(gy).astype(np.float64), f(w).astype(np.float64), x_shape[2:], **a)


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:5])))
def test_input_grad_matches_float64(geo):
    gy, x, attrs = _case(geo)
    w = _forward_case(geo)[1]
    got = _input_grad(rm.tensor(gy, device=DEVICE), rm.tensor(w, device=DEVICE), x.shape, attrs)
    want = _input_reference(gy, w, x.shape, attrs)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= 1e-5 * _input_reference(gy, w, x.shape, attrs, True) + 1e-6)


@pytest.mark.parametrize("geo", GEOMETRIES[:3], ids=lambda g: "x".join(map(str, g[:5])))
def test_input_grad_agrees_with_the_im2col_path_and_offsets(geo, monkeypatch):
    gy, x, attrs = _case(geo)
    w = _forward_case(geo)[1]
    gy2 = np.concatenate([np.ones((1, *gy.shape[1:]), np.float32), gy])
    w2 = np.concatenate([np.ones((1, *w.shape[1:]), np.float32), w])
    gyt, wt = rm.tensor(gy2, device=DEVICE)[1:], rm.tensor(w2, device=DEVICE)[1:]
    implicit = _input_grad(gyt, wt, x.shape, attrs)
    monkeypatch.setenv(nn_conv_wgrad.IM2COL_ENV, "1")
    im2col = _input_grad(gyt, wt, x.shape, attrs)
    assert np.any(implicit != 0)
    assert np.all(np.abs(implicit - im2col) <= 2e-5 * _input_reference(gy, w, x.shape, attrs, True) + 1e-6)


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:5])))
def test_forward_matches_float64(geo):
    x, w, attrs = _forward_case(geo)
    a = {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    want = conv2d_reference(x.astype(np.float64), w.astype(np.float64), **a)
    got = _conv(rm.tensor(x, device=DEVICE), rm.tensor(w, device=DEVICE), attrs)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= _forward_tolerance(x, w, attrs, 1e-5))


def test_forward_float16_and_offsets():
    x, w, attrs = _forward_case(GEOMETRIES[2], "float16")
    a = {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    want = conv2d_reference(x.astype(np.float64), w.astype(np.float64), **a)
    got = _conv(rm.tensor(x, dtype="float16", device=DEVICE), rm.tensor(w, dtype="float16", device=DEVICE), attrs)
    bound = np.abs(want) * 2 ** -10 + _forward_tolerance(x, w, attrs, 1e-5)  # one float16 rounding
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
    x2 = np.concatenate([np.ones((1, *x.shape[1:]), np.float32), x.astype(np.float32)])
    w2 = np.concatenate([np.ones((1, *w.shape[1:]), np.float32), w.astype(np.float32)])
    got = _conv(rm.tensor(x2, device=DEVICE)[1:], rm.tensor(w2, device=DEVICE)[1:], attrs)
    assert np.all(np.abs(got - want) <= _forward_tolerance(x, w, attrs, 1e-5))


@pytest.mark.parametrize("geo", GEOMETRIES[:3], ids=lambda g: "x".join(map(str, g[:5])))
def test_forward_agrees_with_the_im2col_path(geo, monkeypatch):
    x, w, attrs = _forward_case(geo)
    xt, wt = rm.tensor(x, device=DEVICE), rm.tensor(w, device=DEVICE)
    implicit = _conv(xt, wt, attrs)
    monkeypatch.setenv(nn_conv_wgrad.IM2COL_ENV, "1")
    im2col = _conv(xt, wt, attrs)
    assert np.any(implicit != 0)
    assert np.all(np.abs(implicit - im2col) <= 2 * _forward_tolerance(x, w, attrs, 1e-5))


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:5])))
def test_matches_float64(geo):
    gy, x, attrs = _case(geo)
    want = conv2d_backward_weight_reference(gy.astype(np.float64), x.astype(np.float64), **attrs)
    got = _weight_grad(gy, x, attrs)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= _tolerance(gy, x, attrs, 1e-5))


def test_float16_matches_float64():
    gy, x, attrs = _case(GEOMETRIES[1], "float16")
    want = conv2d_backward_weight_reference(gy.astype(np.float64), x.astype(np.float64), **attrs)
    got = _weight_grad(gy, x, attrs, "float16").astype(np.float64)
    # partial sums are float32; the one float16 rounding of the result dominates
    assert np.all(np.abs(got - want) <= np.abs(want) * 2 ** -10 + _tolerance(gy, x, attrs, 1e-5))


def test_offset_inputs():
    gy, x, attrs = _case(GEOMETRIES[2])
    gy2 = np.concatenate([RNG.standard_normal((1, *gy.shape[1:])).astype(np.float32), gy])
    x2 = np.concatenate([RNG.standard_normal((1, *x.shape[1:])).astype(np.float32), x])
    got = _weight_grad_of(rm.tensor(gy2, device=DEVICE)[1:], rm.tensor(x2, device=DEVICE)[1:], attrs)
    want = conv2d_backward_weight_reference(gy.astype(np.float64), x.astype(np.float64), **attrs)
    assert np.all(np.abs(got - want) <= _tolerance(gy, x, attrs, 1e-5))


def test_same_bits_every_run():
    gy, x, attrs = _case((16, 16, 14, 14, 32, (3, 3), (1, 1), (1, 1), (1, 1), 1))
    first = _weight_grad(gy, x, attrs)
    for _ in range(3):
        assert np.array_equal(_weight_grad(gy, x, attrs), first)


@pytest.mark.parametrize("geo", GEOMETRIES[:3], ids=lambda g: "x".join(map(str, g[:5])))
def test_agrees_with_the_gemm_path(geo, monkeypatch):
    gy, x, attrs = _case(geo)
    split = _weight_grad(gy, x, attrs)
    monkeypatch.setenv(nn_conv_wgrad.IM2COL_ENV, "1")
    gemm = _weight_grad(gy, x, attrs)
    assert not np.array_equal(split, 0 * split)
    assert np.all(np.abs(split - gemm) <= 2 * _tolerance(gy, x, attrs, 1e-5))


def _dev(max_groups=65535, max_binding=1 << 27):
    return types.SimpleNamespace(max_groups=max_groups, max_binding=max_binding)


@pytest.mark.parametrize("rows", [1, 15, 16, 17, 255, 4096, 50_176, 1_000_003])
@pytest.mark.parametrize("tiles", [1, 18, 5000])
def test_plan_covers_every_position_once(rows, tiles):
    splits, chunk = nn_conv_wgrad.plan(rows, tiles, 144, _dev())
    assert chunk % nn_conv_wgrad.TILE == 0
    assert (splits - 1) * chunk < rows <= splits * chunk
    assert splits * tiles <= max(tiles, nn_conv_wgrad.TARGET_GROUPS + tiles)
    if splits > 1:
        assert chunk >= nn_conv_wgrad.MIN_CHUNK


def test_plan_fills_the_gpu_for_the_cnn_shapes():
    assert nn_conv_wgrad.plan(64 * 784, 1, 144, _dev())[0] >= 128
    assert nn_conv_wgrad.plan(64 * 196, 18, 4608, _dev())[0] * 18 >= 512


def test_plan_keeps_partials_within_a_binding():
    splits, _ = nn_conv_wgrad.plan(1_000_000, 1, 1000, _dev(max_binding=40_000))
    assert splits * 1000 * 4 <= 40_000

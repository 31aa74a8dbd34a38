"""max_pool2d_backward on wgpu in one pass for windows that do not overlap (backends/rumus_wgpu/nn_pool.py): each
input element finds its covering window's first maximum again instead of reading an argmax buffer. Against the
float64 reference with ties, NaN, -inf, padding, ceil mode, dilation and offsets, and against the two-pass path
(overlapping windows) on the same data. The backend's kernel is called itself: with rumus-vision installed, its
row kernel takes non-overlapping windows in front of it."""

import numpy as np
import pytest

import rumus as rm
from rumus_contracts.ops.nn_pool import MAX_ATTRS, max_pool2d_backward_reference, pool_output_shape
from rumus_wgpu.nn_pool import max_pool2d_backward
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(16)

# (x shape, attrs): all non-overlapping (stride > dilation * (kernel - 1)) but the last two
CASES = [
    ((2, 3, 8, 8), {}),
    ((2, 2, 9, 7), {"ceil_mode": True}),
    ((1, 2, 7, 10), {"kernel_size": (3, 2), "stride": (3, 2), "padding": (1, 1)}),
    ((1, 3, 9, 9), {"kernel_size": (2, 2), "stride": (3, 3), "dilation": (2, 2)}),
    ((2, 1, 6, 5), {"kernel_size": (1, 3), "stride": (1, 4)}),
    ((1, 2, 9, 8), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),          # overlapping
    ((1, 2, 8, 8), {"kernel_size": (2, 2), "stride": (2, 2), "dilation": (2, 2)}),          # overlapping span
]


def _backward(g, x, attrs):
    gx = rm.empty(x.shape, device=DEVICE)
    max_pool2d_backward([gx._arg], [g._arg, x._arg], attrs)
    return gx.numpy()


def _data(shape, attrs):
    """Small integers (many ties), a NaN and a -inf in the first plane."""
    x = RNG.integers(-3, 3, shape).astype(np.float32)
    x.reshape(-1)[[1, 5]] = [np.nan, -np.inf]
    g = RNG.standard_normal(pool_output_shape("max_pool2d", shape, attrs)).astype(np.float32)
    return g, x


@pytest.mark.parametrize("shape,extra", CASES, ids=[str(c) for c in CASES])
def test_matches_float64(shape, extra):
    attrs = {**MAX_ATTRS, **extra}
    g, x = _data(shape, attrs)
    want = max_pool2d_backward_reference(g.astype(np.float64), x.astype(np.float64), **attrs)
    got = _backward(rm.tensor(g, device=DEVICE), rm.tensor(x, device=DEVICE), attrs)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_offset_inputs():
    attrs = dict(MAX_ATTRS)
    g, x = _data((2, 3, 8, 8), attrs)
    gt = rm.tensor(np.concatenate([np.ones_like(g[:1]), g]), device=DEVICE)[1:]
    xt = rm.tensor(np.concatenate([np.full_like(x[:1], 9.0), x]), device=DEVICE)[1:]
    want = max_pool2d_backward_reference(g.astype(np.float64), x.astype(np.float64), **attrs)
    np.testing.assert_allclose(_backward(gt, xt, attrs), want, rtol=1e-6, atol=1e-6)


def test_one_pass_runs_for_2x2_stride_2():
    attrs = dict(MAX_ATTRS)
    g, x = _data((1, 1, 4, 4), attrs)
    _backward(rm.tensor(g, device=DEVICE), rm.tensor(x, device=DEVICE), attrs)
    cache = rm.tensor([0.0], device=DEVICE)._arg.buffer.dev.programs._cache
    assert any(isinstance(k, tuple) and k[:3] == ("nn", "nn_pool", "window_max+max_backward_direct+max_gather")
               for k in cache)

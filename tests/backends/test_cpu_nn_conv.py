"""The CPU conv kernels' two GEMM strategies (per-sample batched products, one channel-major GEMM) and
their chunking over samples, forced on small inputs and checked against the schemas' references; with
numpy's BLAS attached the fused kernels run instead, so both are checked (im2col forced by `fused`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rumus_contracts import TensorArg, contiguous_strides, float32, float64
from rumus_contracts.ops import nn_conv

from rumus_cpu import kernels_nn_conv as K


def arg(a: np.ndarray) -> TensorArg:
    dt = float64 if a.dtype == np.float64 else float32
    flat = np.concatenate([np.full(3, 77, a.dtype), np.ascontiguousarray(a).reshape(-1)])  # offset 3
    return TensorArg(flat, a.shape, contiguous_strides(a.shape), 3, dt)


def out(shape: tuple[int, ...], dtype: Any) -> TensorArg:
    return arg(np.full(shape, np.nan, dtype))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("per_sample_max", [0, 1 << 40])
@pytest.mark.parametrize("chunk", [1, 150, 1 << 21])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_strategies_and_chunks(monkeypatch: pytest.MonkeyPatch, per_sample_max: int, chunk: int,
                                    dtype: Any, fused: bool) -> None:
    if not fused:  # the im2col path, as where numpy's BLAS is not attached
        monkeypatch.setattr(K, "_fused", lambda *args: False)
    monkeypatch.setattr(K, "PER_SAMPLE_MAX", per_sample_max)
    monkeypatch.setattr(K, "CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(0)
    attrs = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}
    x, w = rng.uniform(-1, 1, (5, 4, 7, 6)), rng.uniform(-1, 1, (6, 2, 3, 2))
    (ys,) = nn_conv._conv2d_shape([x.shape, w.shape], attrs)
    g = rng.uniform(-1, 1, ys)
    rtol = 1e-5 if dtype == np.float32 else 1e-12

    y = out(ys, dtype)
    K.conv2d([y], [arg(x.astype(dtype)), arg(w.astype(dtype))], attrs)
    np.testing.assert_allclose(K.view(y), nn_conv.conv2d_reference(x, w, **attrs), rtol=rtol, atol=rtol)

    gx = out(x.shape, dtype)
    K.conv2d_backward_input([gx], [arg(g.astype(dtype)), arg(w.astype(dtype))], {**attrs, "input_size": x.shape[2:]})
    np.testing.assert_allclose(K.view(gx), nn_conv.conv2d_backward_input_reference(g, w, x.shape[2:], **attrs),
                               rtol=rtol, atol=rtol)

    gw = out(w.shape, dtype)
    K.conv2d_backward_weight([gw], [arg(g.astype(dtype)), arg(x.astype(dtype))], {**attrs, "kernel_size": w.shape[2:]})
    np.testing.assert_allclose(K.view(gw), nn_conv.conv2d_backward_weight_reference(g, x, w.shape[2:], **attrs),
                               rtol=rtol, atol=rtol)

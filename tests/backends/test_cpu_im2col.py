"""The C im2col / col2im (csrc/internal/nn_conv_impl.h) against numpy references, bit for bit: im2col is a
pure copy, and col2im adds the cols rows r = 0, 1, ... in order, each element at most once per row, which the
reference repeats. Random shapes cover the stride-1 / dilation-1 fast path (padding 0..3, kernels 1..5,
sides 1..20) and the generic path (stride or dilation 2); both layouts, float32 and float64, and the fast
path's AVX-512 segments as well as its portable loops (the ISA part lowered with rumus_sgemm_set_isa)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rumus_cpu import kernels_nn_conv as K
from rumus_cpu._lib import ffi, lib


def _shapes(count: int, seed: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    found: list[tuple[int, ...]] = []
    while len(found) < count:
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        h, w = (int(v) for v in rng.integers(1, 21, 2))
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        ph, pw = (int(v) for v in rng.integers(0, 4, 2))
        fast = rng.random() < 0.6
        sh, sw, dh, dw = (1, 1, 1, 1) if fast else (int(v) for v in rng.integers(1, 3, 4))
        ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        if ho >= 1 and wo >= 1:
            found.append((n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo))
    return found


SHAPES = _shapes(300, 0) + [(2, 3, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 14, 14),
                            (1, 2, 20, 17, 5, 5, 1, 1, 3, 3, 1, 1, 22, 19),
                            (1, 2, 1, 1, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1), (1, 1, 3, 20, 1, 1, 1, 1, 0, 0, 1, 1, 3, 20),
                            (1, 1, 3, 40, 3, 3, 1, 1, 1, 1, 1, 1, 3, 40)]  # a segment of more than 16 floats


def _reference_windows(shape: tuple[int, ...]) -> Any:
    """For each cols row r = (c*kh + i)*kw + j: the output slices and input slices of its valid part."""
    n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = shape
    for ci in range(c):
        for i in range(kh):
            for j in range(kw):
                oh = [o for o in range(ho) if 0 <= o * sh - ph + i * dh < h]
                ow = [o for o in range(wo) if 0 <= o * sw - pw + j * dw < w]
                yield (ci * kh + i) * kw + j, ci, oh, ow, [o * sh - ph + i * dh for o in oh], [
                    o * sw - pw + j * dw for o in ow]


def _im2col_reference(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, w, kh, kw, *_, ho, wo = shape
    cols = np.zeros((n, c * kh * kw, ho, wo), x.dtype)
    for r, ci, oh, ow, ih, iw in _reference_windows(shape):
        if oh and ow:
            cols[:, r][:, np.ix_(oh, ow)[0], np.ix_(oh, ow)[1]] = x[:, ci][:, np.ix_(ih, iw)[0], np.ix_(ih, iw)[1]]
    return cols.reshape(n, c * kh * kw, ho * wo)


def _col2im_reference(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, w, kh, kw, *_, ho, wo = shape
    x = np.zeros((n, c, h, w), cols.dtype)
    cols = cols.reshape(n, c * kh * kw, ho, wo)
    for r, ci, oh, ow, ih, iw in _reference_windows(shape):
        if oh and ow:  # each element at most once per row: one elementwise addition, in row order
            a, b = np.ix_(ih, iw)
            x[:, ci][:, a, b] = x[:, ci][:, a, b] + cols[:, r][:, np.ix_(oh, ow)[0], np.ix_(oh, ow)[1]]
    return x


@pytest.fixture(params=["best", "portable"])
def isa(request: pytest.FixtureRequest) -> Any:
    lib.rumus_sgemm_set_isa(-1 if request.param == "best" else 0)
    try:
        yield request.param
    finally:
        lib.rumus_sgemm_set_isa(-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", [0, 1])
def test_im2col_and_col2im_match_the_references_bit_for_bit(dtype: Any, layout: int, isa: str) -> None:
    rng = np.random.default_rng(1)
    name = np.dtype(dtype).name
    for shape in SHAPES:
        n, c, h, w, kh, kw, *_, ho, wo = shape
        g = ffi.new("int64_t[]", [*shape, layout, 1, 1])
        x = rng.uniform(-1, 1, (n, c, h, w)).astype(dtype)
        rows, hw = c * kh * kw, ho * wo
        cols = np.full((n, rows, hw) if layout == 0 else (rows, n, hw), np.nan, dtype)
        K._IM2COL[name](ffi.from_buffer(x), ffi.from_buffer(cols), g)
        got = cols if layout == 0 else cols.transpose(1, 0, 2)
        np.testing.assert_array_equal(got, _im2col_reference(x, shape), err_msg=str(shape))

        src = rng.uniform(-1, 1, cols.shape).astype(dtype)
        gx = np.full((n, c, h, w), np.nan, dtype)
        K._COL2IM[name](ffi.from_buffer(src), ffi.from_buffer(gx), g)
        want = _col2im_reference(src if layout == 0 else np.ascontiguousarray(src.transpose(1, 0, 2)), shape)
        np.testing.assert_array_equal(gx, want, err_msg=str(shape))

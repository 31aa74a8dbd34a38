"""Split-K GEMMs in every float dtype: the float32 partial sums are added into a C of the operands'
dtype. Session 6 found float16 split-K writing float32 words into the float16 C (the column-sum
kernel ignored the output dtype), which gave NaN weight gradients in the digits CNN under autocast
float16 (`rumus demo --amp float16` on the GPU skipped every step). Shapes: the planner's own split
(64 x 1024 x 288, the CNN's conv3 weight gradient) and forced splits with ragged edges."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

DTYPES = {"float32": (rm.float32, 1e-4), "float16": (rm.float16, 2e-3), "bfloat16": (rm.bfloat16, 1.6e-2)}
CASES = [(None, 64, 288, 1024), (None, 64, 300, 1024), ("64x64w:4", 70, 90, 600), ("128x128:3", 130, 140, 900),
         ("32x32:2", 33, 290, 256)]


def _rounded(a: np.ndarray, dt: rm.DType) -> np.ndarray:
    return rm.tensor(a).to(dt).float().numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("forced,m,n,k", CASES)
def test_split_k_result_in_the_operands_dtype(monkeypatch: pytest.MonkeyPatch, dtype: str, forced: str | None,
                                             m: int, n: int, k: int) -> None:
    if forced:
        monkeypatch.setenv("RUMUS_WGPU_GEMM", forced)
    dt, rtol = DTYPES[dtype]
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    ta = rm.tensor(a, device=DEVICE).to(dt)
    tb = rm.tensor(b, device=DEVICE).to(dt)
    out = (ta @ tb.T)
    assert out.dtype == dt
    got = out.float().numpy()
    want = _rounded(a, dt) @ _rounded(b, dt).T
    assert np.isfinite(got).all()
    # one rounding of each result to the dtype, plus float32 accumulation
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.sqrt(k) * 2)


def test_conv_weight_gradient_float16_matches_float32() -> None:
    """The digits CNN's conv3 weight gradient ([64, 32, 4, 4] input, 64 x 32 x 3 x 3 weight) under float16."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32, 4, 4)).astype(np.float32)
    w = (rng.standard_normal((64, 32, 3, 3)) * 0.1).astype(np.float32)
    g = rng.standard_normal((64, 64, 4, 4)).astype(np.float32)
    grads = {}
    for dt in (rm.float32, rm.float16):
        wt = rm.tensor(w, device=DEVICE).to(dt).requires_grad_()
        y = rm.nn.functional.conv2d(rm.tensor(x, device=DEVICE).to(dt), wt, padding=1)
        y.backward(rm.tensor(g, device=DEVICE).to(dt))
        grads[dt] = wt.grad.float().numpy()
    assert np.isfinite(grads[rm.float16]).all()
    np.testing.assert_allclose(grads[rm.float16], grads[rm.float32], rtol=1e-2, atol=0.1)

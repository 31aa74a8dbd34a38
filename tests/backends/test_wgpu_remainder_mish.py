"""wgpu remainder (ONNX Mod with fmod=0, Python's %) and mish at their edges, against float64 references of
torch's CPU definitions: remainder is fmod(a, b) moved by b when it is non-zero and its sign differs from b's
(so the result has the divisor's sign, a zero keeps fmod's sign, fmod's inf/nan cases stay nan, a finite a
over an infinite b of the other sign is that infinity), and mish is x * tanh(softplus(x)) with softplus's
threshold of 20. The ONNX node suite's edge cases (tests/onnx/node_tests.py) are among these values."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("wgpu")
import rumus as rm  # noqa: E402
from rumus import BackendUnavailable, backend_api  # noqa: E402

try:
    backend_api.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)

SPECIAL = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 2.5, -7.5, 1e-38, -1e-45, 1e30, -1e30, 3.4e38, np.inf, -np.inf, np.nan]


def torch_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        mod = np.fmod(a, b)
        return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


def test_remainder_over_every_pair_of_special_values() -> None:
    a, b = (g.astype(np.float32).ravel() for g in np.meshgrid(SPECIAL, SPECIAL))
    want = torch_remainder(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    got = rm.remainder(rm.tensor(a, device="wgpu"), rm.tensor(b, device="wgpu")).numpy()
    bad = ~((got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), list(zip(a[bad], b[bad], got[bad], want[bad]))


def test_remainder_of_random_floats_is_exact() -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(4096) * 10.0 ** rng.integers(-3, 6, 4096)).astype(np.float32)
    b = (rng.standard_normal(4096) * 10.0 ** rng.integers(-3, 3, 4096)).astype(np.float32)
    want = torch_remainder(a.astype(np.float64), b.astype(np.float64))
    got = rm.remainder(rm.tensor(a, device="wgpu"), rm.tensor(b, device="wgpu")).numpy()
    # fmod is exact; the move by b is one float32 rounding of mod + b
    np.testing.assert_allclose(got, want, rtol=1.2e-7, atol=0)


def test_mish_against_float64() -> None:
    x = np.concatenate([np.linspace(-30, 30, 6001), SPECIAL, [-88.0, 19.999, 20.001, 1e-20]]).astype(np.float32)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        softplus = np.where(x64 > 20, x64, np.log1p(np.exp(x64)))
        want = x64 * np.tanh(softplus)
    got = rm.nn.functional.mish(rm.tensor(x, device="wgpu")).numpy()
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-7)
    assert np.array_equal(got[~finite], want[~finite], equal_nan=True)

"""Every GEMM tile shape, forced, in every operand layout a Linear layer runs (x @ W.T, dY @ W, dY.T @ x
as views), on shapes whose row and column tile counts leave ragged edges: each output written once and
right, against float64."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

CASES = [  # (tile forced, m, n, k): row-tile counts 1, 7, 8, 9, 17 and ragged edges
    ("32x32", 293, 70, 37), ("32x32", 32, 500, 16), ("64x64w", 1100, 200, 64), ("64x64", 520, 136, 40),
    ("128x128", 1090, 260, 24), ("128x64", 130, 1000, 12)]


@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
@pytest.mark.parametrize("tile,m,n,k", CASES)
def test_every_tile_written_once(monkeypatch: pytest.MonkeyPatch, layout: str, tile: str, m: int, n: int,
                                 k: int) -> None:
    monkeypatch.setenv("RUMUS_WGPU_GEMM", tile)
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((k, m) if layout == "tn" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "nt" else (k, n)).astype(np.float32)
    ta, tb = rm.tensor(a, device=DEVICE), rm.tensor(b, device=DEVICE)
    if layout == "tn":
        ta, a = ta.T, a.T
    if layout == "nt":
        tb, b = tb.T, b.T
    out = (ta @ tb).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))

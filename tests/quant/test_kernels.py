"""q8_linear / int4_linear against dequantise-then-matmul in float64, every ISA path of the C kernels."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

import rumus as rm
from rumus.backend_api import from_storage
from rumus_contracts import int4, q8
from rumus_contracts.ops import quant as layout

ON_CPU = os.environ.get("RUMUS_BACKEND", "cpu").split(":")[0] == "cpu"
SHAPES = [(1, 4096, 64), (1, 77, 9), (5, 300, 33), (64, 256, 130), (3, 1, 1), (2, 513, 8)]


@pytest.fixture(params=["best", "portable"])
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    if not ON_CPU:
        yield "device"
        return
    from rumus_cpu._lib import lib
    lib.rumus_quant_set_isa(0 if request.param == "portable" else -1)
    try:
        yield request.param
    finally:
        lib.rumus_quant_set_isa(-1)


def _close(got: np.ndarray, want: np.ndarray, k: int) -> None:
    # float32 accumulation of k products: error grows like sqrt(k) ulps of the row's magnitude
    scale = np.abs(want).max() if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.sqrt(max(k, 1)) * max(scale, 1.0))


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("bs", [16, 32, 128])
def test_q8_linear_matches_float64(isa: str, m: int, k: int, n: int, bs: int) -> None:
    rng = np.random.default_rng(m * 7 + k + n + bs)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    words = layout.q8_pack(w, bs)
    want = x.astype(np.float64) @ layout.q8_unpack(words, k, n, bs).astype(np.float64)
    got = rm.ops.q8_linear(rm.tensor(x), from_storage(words, q8(bs)), n=n).numpy()
    _close(got, want, k)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("g", [8, 32, 128])
def test_int4_linear_matches_float64(isa: str, m: int, k: int, n: int, g: int) -> None:
    rng = np.random.default_rng(m * 5 + k + n + g)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    s, z = layout.int4_params(w, g)
    codes = layout.int4_codes(w, s, z, g)
    want = x.astype(np.float64) @ layout.int4_dequant(codes, s, z, g).astype(np.float64)
    got = rm.ops.int4_linear(rm.tensor(x), from_storage(layout.int4_pack_codes(codes, g), int4(g)), rm.tensor(s),
                             rm.tensor(z)).numpy()
    _close(got, want, k)


@pytest.mark.skipif(not ON_CPU, reason="ISA dispatch is the C backend's")
def test_the_machine_reports_an_isa() -> None:
    from rumus_cpu._lib import lib
    assert lib.rumus_quant_isa() in (0, 1)

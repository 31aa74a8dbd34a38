"""q8_linear / int4_linear against dequantise-then-matmul in float64, every ISA path of the C kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import rumus as rm
from rumus.backend_api import from_storage
from rumus_contracts import RumusError, int4, q8
from rumus_contracts.ops import quant as layout

ON_CPU = os.environ.get("RUMUS_BACKEND", "cpu").split(":")[0] == "cpu"
SHAPES = [(1, 4096, 64), (1, 77, 9), (5, 300, 33), (64, 256, 130), (3, 1, 1), (2, 513, 8)]


ISAS = ["portable", "avx2", "avx512vnni"]


def _available(name: str) -> bool:
    from rumus_cpu._lib import lib
    return ISAS.index(name) <= int(lib.rumus_quant_best_isa())


@pytest.fixture(params=ISAS)
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every inner loop this machine has, each forced in turn (the best one is what users get)."""
    if not ON_CPU:
        yield "device"
        return
    from rumus_cpu.kernels_quant import force_isa, quant_isa
    if not _available(request.param):
        pytest.skip(f"this CPU has no {request.param}")
    force_isa(request.param)
    try:
        assert quant_isa() == request.param
        yield request.param
    finally:
        force_isa(None)


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
def test_the_machine_reports_its_best_isa() -> None:
    from rumus_cpu._lib import lib
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    best = int(lib.rumus_quant_best_isa())
    if " avx512_vnni" in flags and " avx512bw" in flags and " avx2" in flags:
        assert ISAS[best] == "avx512vnni"
    elif " avx2" in flags and " fma" in flags:
        assert ISAS[best] == "avx2"
    assert best in (0, 1, 2)


@pytest.mark.skipif(not ON_CPU, reason="ISA dispatch is the C backend's")
def test_forcing_an_isa_the_cpu_lacks_or_a_typo_is_refused() -> None:
    from rumus_cpu.kernels_quant import force_isa
    with pytest.raises(RumusError, match="not one of"):
        force_isa("avx513")
    if not _available("avx512vnni"):
        with pytest.raises(RumusError, match="only has"):
            force_isa("avx512vnni")


@pytest.mark.skipif(not ON_CPU, reason="ISA dispatch is the C backend's")
@pytest.mark.parametrize("name", ISAS)
def test_env_var_forces_the_path_and_rumus_info_prints_it(name: str) -> None:
    if not _available(name):
        pytest.skip(f"this CPU has no {name}")
    env = {**os.environ, "RUMUS_QUANT_ISA": name, "RUMUS_BACKEND": "cpu"}
    code = ("import numpy as np, rumus as rm; from rumus.backend_api import from_storage; "
            "from rumus_contracts import q8; from rumus_contracts.ops import quant as L; "
            "w = np.ones((64, 3), np.float32); "
            "y = rm.ops.q8_linear(rm.tensor(np.ones((1, 64), np.float32)), from_storage(L.q8_pack(w, 32), q8(32)), n=3); "
            "assert np.allclose(y.numpy(), L.q8_unpack(L.q8_pack(w, 32), 64, 3, 32).sum(0), rtol=1e-6); from rumus_cpu.kernels_quant import quant_isa; print(quant_isa())")
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == name
    info = subprocess.run([sys.executable, "-m", "rumus", "info"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert f"quant_isa={name}" in info.stdout, info.stdout + info.stderr


@pytest.mark.parametrize("bs", [16, 64, 256])
def test_q8_linear_extremes_nan_and_batches(isa: str, bs: int) -> None:
    """Activations spanning many binades in one block (the integer path's worst case), a zero row,
    a NaN row (the VNNI path hands it to the float loop: NaN out, not garbage) and a large batch."""
    rng = np.random.default_rng(bs)
    k, n, m = 3 * bs + 5, 37, 70
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-6, 4, (m, k))).astype(np.float32)
    x[1] = 0.0
    words = layout.q8_pack(w, bs)
    want = x.astype(np.float64) @ layout.q8_unpack(words, k, n, bs).astype(np.float64)
    got = rm.ops.q8_linear(rm.tensor(x), from_storage(words, q8(bs)), n=n).numpy()
    bound = 4e-7 * np.sqrt(k) * (np.abs(x).astype(np.float64) @ np.abs(w)).max(axis=1, keepdims=True)
    assert np.all(np.abs(got - want) <= bound)
    assert np.all(got[1] == 0.0)
    x[2, 5] = np.nan
    got = rm.ops.q8_linear(rm.tensor(x), from_storage(words, q8(bs)), n=n).numpy()
    assert np.isnan(got[2]).all() and np.isfinite(np.delete(got, 2, axis=0)).all()


@pytest.mark.parametrize("g", [8, 16, 256])
def test_int4_linear_extremes_nan_and_batches(isa: str, g: int) -> None:
    rng = np.random.default_rng(g)
    k, n, m = 2 * g + 8, 530, 9  # n > one 512-column chunk, with a ragged tail
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-6, 4, (m, k))).astype(np.float32)
    x[1] = 0.0
    s, z = layout.int4_params(w, g)
    codes = layout.int4_codes(w, s, z, g)
    wd = layout.int4_dequant(codes, s, z, g).astype(np.float64)
    want = x.astype(np.float64) @ wd
    args = (from_storage(layout.int4_pack_codes(codes, g), int4(g)), rm.tensor(s), rm.tensor(z))
    got = rm.ops.int4_linear(rm.tensor(x), *args).numpy()
    bound = 4e-7 * np.sqrt(k) * (np.abs(x).astype(np.float64) @ np.abs(wd)).max(axis=1, keepdims=True)
    assert np.all(np.abs(got - want) <= bound)
    assert np.all(got[1] == 0.0)
    x[2, 5] = np.inf
    got = rm.ops.int4_linear(rm.tensor(x), *args).numpy()
    assert not np.isfinite(got[2]).any() and np.isfinite(np.delete(got, 2, axis=0)).all()

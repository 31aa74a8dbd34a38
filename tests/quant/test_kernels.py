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


@pytest.fixture(params=[*ISAS, "panels"])
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every register loop this machine has, each forced in turn at every batch size, then the default:
    the best loop below 16 rows and the float GEMM over dequantised panels from 16 rows on."""
    if not ON_CPU:
        if request.param != "panels":
            pytest.skip("the ISA paths are the CPU's: one run per test on another device")
        yield "device"
        return
    from rumus_cpu.kernels_quant import PANEL_MIN_ROWS, force_isa, quant_isa, set_panel_rows
    if request.param == "panels":
        yield request.param
        return
    if not _available(request.param):
        pytest.skip(f"this CPU has no {request.param}")
    force_isa(request.param)
    set_panel_rows(1 << 62)
    try:
        assert quant_isa() == request.param
        yield request.param
    finally:
        force_isa(None)
        set_panel_rows(PANEL_MIN_ROWS)


def _close(got: np.ndarray, want: np.ndarray, k: int) -> None:
    # float32 accumulation of k products: error grows like sqrt(k) ulps of the row's magnitude
    scale = np.abs(want).max() if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.sqrt(max(k, 1)) * max(scale, 1.0))


def _quantized_matmul(scheme: str, w: np.ndarray, x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the kernel's x @ W for W = w packed as scheme(size), that W dequantised in float64)."""
    k, n = w.shape
    if scheme == "q8":
        words = layout.q8_pack(w, size)
        got = rm.ops.q8_linear(rm.tensor(x), from_storage(words, q8(size)), n=n).numpy()
        return got, layout.q8_unpack(words, k, n, size).astype(np.float64)
    s, z = layout.int4_params(w, size)
    codes = layout.int4_codes(w, s, z, size)
    got = rm.ops.int4_linear(rm.tensor(x), from_storage(layout.int4_pack_codes(codes, size), int4(size)),
                             rm.tensor(s), rm.tensor(z)).numpy()
    return got, layout.int4_dequant(codes, s, z, size).astype(np.float64)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("scheme,size", [("q8", 16), ("q8", 32), ("q8", 128), ("int4", 8), ("int4", 32),
                                         ("int4", 128)])
def test_linear_matches_float64(isa: str, m: int, k: int, n: int, scheme: str, size: int) -> None:
    rng = np.random.default_rng(m * (7 if scheme == "q8" else 5) + k + n + size)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    got, wd = _quantized_matmul(scheme, w, x, size)
    _close(got, x.astype(np.float64) @ wd, k)


@pytest.mark.parametrize("scheme,size", [("q8", 16), ("q8", 64), ("q8", 256), ("int4", 8), ("int4", 16),
                                         ("int4", 256)])
def test_linear_extremes_nan_and_batches(isa: str, scheme: str, size: int) -> None:
    """Activations spanning many binades in one block (the VNNI path's integer form of x is relative to
    the block's absmax), a zero row, a NaN / inf row (VNNI hands it to the float loop: non-finite out,
    not garbage), batches, N past one 512-column chunk with a ragged tail, K % size != 0."""
    rng = np.random.default_rng(size)
    k, n, m = (3 * size + 5, 37, 70) if scheme == "q8" else (2 * size + 8, 530, 9)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-6, 4, (m, k))).astype(np.float32)
    x[1] = 0.0
    got, wd = _quantized_matmul(scheme, w, x, size)
    bound = 4e-7 * np.sqrt(k) * (np.abs(x).astype(np.float64) @ np.abs(wd)).max(axis=1, keepdims=True)
    assert np.all(np.abs(got - x.astype(np.float64) @ wd) <= bound)
    assert np.all(got[1] == 0.0)
    x[2, 5] = np.nan if scheme == "q8" else np.inf
    got, _ = _quantized_matmul(scheme, w, x, size)
    assert not np.isfinite(got[2]).any() and np.isfinite(np.delete(got, 2, axis=0)).all()


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
    code = ("import numpy as np, rumus as rm\n"
            "from rumus.backend_api import from_storage\n"
            "from rumus_contracts import q8\n"
            "from rumus_contracts.ops import quant as L\n"
            "from rumus_cpu.kernels_quant import quant_isa\n"
            "w = np.ones((64, 3), np.float32)\n"
            "packed = from_storage(L.q8_pack(w, 32), q8(32))\n"
            "y = rm.ops.q8_linear(rm.tensor(np.ones((1, 64), np.float32)), packed, n=3)\n"
            "assert np.allclose(y.numpy(), L.q8_unpack(L.q8_pack(w, 32), 64, 3, 32).sum(0), rtol=1e-6)\n"
            "print(quant_isa())\n")
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == name
    info = subprocess.run([sys.executable, "-m", "rumus", "info"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert f"quant_isa={name}" in info.stdout, info.stdout + info.stderr

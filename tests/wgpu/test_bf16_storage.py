"""bfloat16 on the WebGPU backend (16-bit words, two per u32, f32 math): byte-exact upload and read-back,
casts bit-identical to the CPU backend's (every one of the 65536 patterns, the rounding ties and their
neighbours, a million random float32), odd element counts, and writes into strided views that must not
touch the other half of a shared word."""

from __future__ import annotations

import numpy as np
import pytest
from backends_under_test import wgpu_backend_or_skip

import rumus as rm
from rumus._creation import from_storage

BACKEND = wgpu_backend_or_skip()
GPU = "wgpu:0"
ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")


def _bits(t: rm.Tensor) -> np.ndarray:
    return t._storage.backend.to_numpy(t._arg)  # raw uint16 words (a host copy of the view)


def _bf16(bits: np.ndarray, device: str) -> rm.Tensor:
    return from_storage(bits, rm.bfloat16, device)


def _on_both(values: np.ndarray, dtype: rm.DType) -> tuple[rm.Tensor, rm.Tensor]:
    return rm.tensor(values, dtype=dtype, device="cpu"), rm.tensor(values, dtype=dtype, device=GPU)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} of {want.size} differ, first at {bad[:5]}: got {got[bad[:5]]}, " \
                          f"want {want[bad[:5]]}"


def test_the_backend_lists_bfloat16() -> None:
    assert rm.bfloat16 in BACKEND.capabilities(rm.Device("wgpu", 0)).dtypes


@pytest.mark.parametrize("n", [1, 3, 5, 1001, 65536])
def test_upload_and_read_back_are_byte_exact(n: int) -> None:
    bits = ALL16[:n] if n < 65536 else ALL16
    _same_bits(_bits(_bf16(bits, GPU)), bits)


def test_same_dtype_copies_keep_every_pattern_nan_payloads_included() -> None:
    t = _bf16(ALL16, GPU)
    _same_bits(_bits(t.clone()), ALL16)
    _same_bits(_bits(t[1:].clone()), ALL16[1:])  # odd offset: not a whole-word byte copy
    _same_bits(_bits(t[::3].clone()), ALL16[::3])


def test_every_bfloat16_widens_exactly() -> None:
    wide = _bf16(ALL16, GPU).float().numpy().view(np.uint32)
    want = ALL16.astype(np.uint32) << 16
    nan = (ALL16 & 0x7FFF) > 0x7F80
    _same_bits(wide[~nan], want[~nan])
    assert np.isnan(wide[nan].view(np.float32)).all()


def _ties_and_neighbours() -> np.ndarray:
    """float32 values at, just below and just above every midpoint between consecutive bfloat16 values."""
    widen = (ALL16.astype(np.uint32) << 16).view(np.float32)
    out = []
    for sign in (1, -1):
        v = np.sort(widen[np.isfinite(widen) & (sign * widen >= 0)]).astype(np.float64)
        mid = ((v[:-1] + v[1:]) / 2).astype(np.float32)
        out += [mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    return np.concatenate(out)


@pytest.mark.parametrize("path", ["word_per_invocation", "atomic_halves"])
def test_float32_to_bfloat16_matches_the_cpu_bit_for_bit(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a contiguous even-count output is written a whole word per invocation; RUMUS_WGPU_NOVEC turns that
    # off, and each element is then stored with atomics on its word (the path of strided / odd outputs)
    if path == "atomic_halves":
        monkeypatch.setenv("RUMUS_WGPU_NOVEC", "1")
    rng = np.random.default_rng(0)
    values = np.concatenate([
        _ties_and_neighbours(),
        rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),  # NaNs, denormals
        np.array([3.4028235e38, 3.3961776e38, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 0.0, -0.0],
                 np.float32),
    ])
    cpu, gpu = _on_both(values, rm.float32)
    _same_bits(_bits(gpu.bfloat16()), _bits(cpu.bfloat16()))


def test_bfloat16_to_float16_and_back_match_the_cpu() -> None:
    cpu, gpu = _bf16(ALL16, "cpu"), _bf16(ALL16, GPU)
    got, want = gpu.half().numpy().view(np.uint16), cpu.half().numpy().view(np.uint16)
    nan = np.isnan(want.view(np.float16))
    _same_bits(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(np.float16)).all()
    h_cpu, h_gpu = from_storage(ALL16.view(np.float16), rm.float16, "cpu"), from_storage(
        ALL16.view(np.float16), rm.float16, GPU)
    got, want = _bits(h_gpu.bfloat16()), _bits(h_cpu.bfloat16())
    # a float16 NaN stays NaN, its payload is the GPU's (WGSL leaves NaN bits to the implementation: the
    # H200 gives 0x7fff where the CPU keeps the payload, 0x7fc0); every other value bit for bit
    nan = ((want & 0x7FFF) > 0x7F80)
    _same_bits(got[~nan], want[~nan])
    assert ((got[nan] & 0x7FFF) > 0x7F80).all()


@pytest.mark.parametrize("dtype", [rm.int32, rm.int64])
def test_integers_round_to_bfloat16_once_like_the_cpu(dtype: rm.DType) -> None:
    rng = np.random.default_rng(1)
    big = 2**31 - 1 if dtype == rm.int32 else 2**63 - 1
    ties = np.array([(2**k + 1) * 2**j for k in (8, 9, 24, 25, 30) for j in (0, 1)], np.int64)  # halfway cases
    values = np.concatenate([
        np.arange(-300, 300), ties, ties + 1, ties - 1, -ties,
        rng.integers(-big - 1, big, 20000, dtype=np.int64), [big, -big - 1, 2**24 + 1, 2**24 + 3],
    ]).astype(dtype.numpy)
    cpu, gpu = _on_both(values, dtype)
    _same_bits(_bits(gpu.bfloat16()), _bits(cpu.bfloat16()))


@pytest.mark.parametrize("dtype", [rm.int32, rm.int64, rm.bool])
def test_bfloat16_to_integers_and_bool_match_the_cpu(dtype: rm.DType) -> None:
    cpu, gpu = _bf16(ALL16, "cpu"), _bf16(ALL16, GPU)
    np.testing.assert_array_equal(gpu.to(dtype=dtype).numpy(), cpu.to(dtype=dtype).numpy())


@pytest.mark.parametrize("value", [0.1, -1.0 / 3.0, 1e-40, 3.3961776e38, 1e300, float("nan"), 2.0**-133])
def test_fill_rounds_once_from_the_double_like_the_cpu(value: float) -> None:
    got = _bits(rm.full((5,), value, dtype=rm.bfloat16, device=GPU))
    _same_bits(got, _bits(rm.full((5,), value, dtype=rm.bfloat16, device="cpu")))


@pytest.mark.parametrize("n", [1, 3, 5, 1001])
def test_odd_element_counts_compute_every_element(n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    (ac, ag), (bc, bg) = _on_both(a, rm.bfloat16), _on_both(b, rm.bfloat16)
    # a sum and a product of two bfloat16 are exact in f32: one rounding, so the CPU's bits exactly
    _same_bits(_bits(ag + bg), _bits(ac + bc))
    _same_bits(_bits(ag * bg), _bits(ac * bc))
    _same_bits(_bits(rm.where(ag > bg, ag, bg)), _bits(rm.where(ac > bc, ac, bc)))
    exact = np.exp(ac.numpy().astype(np.float64))
    np.testing.assert_allclose(rm.exp(ag).numpy(), exact, rtol=1.6e-2, atol=1e-5)
    np.testing.assert_allclose(ag.sum().numpy(), ac.numpy().astype(np.float64).sum(), rtol=1.6e-2, atol=1e-2)


def _filled(n: int, device: str) -> rm.Tensor:
    return rm.tensor(np.arange(1, n + 1, dtype=np.float32), dtype=rm.bfloat16, device=device)


@pytest.mark.parametrize("view", ["even", "odd", "middle", "column"])
def test_writes_into_strided_views_leave_the_neighbours_alone(view: str) -> None:
    for device in ("cpu", GPU):  # the CPU's result is the reference
        x = _filled(1001, device)
        y = x.reshape(7, 143) if view == "column" else x
        v = {"even": lambda t: t[::2], "odd": lambda t: t[1::2], "middle": lambda t: t[3:600:3],
             "column": lambda t: t[:, 5]}[view](y)
        v.add_(0.5)
        v.mul_(rm.tensor(np.float32(-2.0), dtype=rm.bfloat16, device=device))
        v.copy_(v.float() * 3)  # a cast written through the view
        if device == "cpu":
            want = _bits(x)
        else:
            _same_bits(_bits(x), want)
    untouched = np.ones(1001, bool)
    untouched[{"even": np.s_[::2], "odd": np.s_[1::2], "middle": np.s_[3:600:3],
               "column": np.s_[5::143]}[view]] = False
    np.testing.assert_array_equal(x.numpy()[untouched], _filled(1001, "cpu").numpy()[untouched])


def test_widened_ops_write_bfloat16_results_into_views() -> None:
    """softmax has no native bfloat16 WGSL: the widening wrapper's result lands in a strided output."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    (ac, ag) = _on_both(a, rm.bfloat16)
    outs = []
    for x in (ac, ag):
        out = rm.zeros((5, 14), dtype=rm.bfloat16, device=x.device)
        out[:, ::2] = rm.softmax(x, 1)
        outs.append(out.numpy())
    np.testing.assert_allclose(outs[1][:, ::2], outs[0][:, ::2], rtol=1.6e-2, atol=1e-5)
    np.testing.assert_array_equal(outs[1][:, 1::2], 0)

"""float16 / bfloat16 conversions on the CPU backend (csrc/internal/half.h through the copy and fill
kernels): every one of the 65536 bit patterns of each format, against numpy (float16) and PyTorch
(bfloat16), plus the ties and their neighbours where rounding goes wrong first."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import rumus as rm
from rumus._creation import from_storage

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
# numpy's own casts of NaN and out-of-range values are the references here, not mistakes
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")


def _same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit for bit, except that any NaN matches any NaN (payload and quiet bit are free)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = np.flatnonzero(got[~nan].view(bits) != want[~nan].view(bits))
    assert bad.size == 0, f"{bad.size} differ, first inputs {want[~nan][bad[:5]]} -> got {got[~nan][bad[:5]]}"


def _f16(bits: np.ndarray) -> rm.Tensor:
    return from_storage(bits.view(np.float16), rm.float16, "cpu")


def _bf16(bits: np.ndarray) -> rm.Tensor:
    return from_storage(bits, rm.bfloat16, "cpu")


def _bf16_bits(t: rm.Tensor) -> np.ndarray:
    return t._storage.backend.to_numpy(t._arg)  # the raw uint16 words


def _torch_bf16_bits(values: np.ndarray) -> np.ndarray:
    return torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _ties_and_neighbours(bits16: np.ndarray, widen: np.ndarray) -> np.ndarray:
    """float32 values at, just below and just above every midpoint between consecutive 16-bit values."""
    lo, hi = widen[:-1].astype(np.float64), widen[1:].astype(np.float64)
    ok = np.isfinite(lo) & np.isfinite(hi) & (np.sign(lo) == np.sign(hi))
    mid = ((lo + hi) / 2)[ok].astype(np.float32)
    return np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
                           widen[np.isfinite(widen)]])


def test_every_float16_widens_exactly() -> None:
    t = _f16(ALL16)
    _same_floats(t.float().numpy(), ALL16.view(np.float16).astype(np.float32))
    _same_floats(t.double().numpy(), ALL16.view(np.float16).astype(np.float64))


def test_every_float16_survives_a_round_trip_bit_for_bit() -> None:
    t = _f16(ALL16)
    finite = ~np.isnan(ALL16.view(np.float16))
    np.testing.assert_array_equal(t.float().half().numpy().view(np.uint16)[finite], ALL16[finite])
    np.testing.assert_array_equal(t.clone().numpy().view(np.uint16), ALL16)  # same-dtype copies are raw


def test_float32_to_float16_rounds_to_nearest_even_like_numpy() -> None:
    widen = ALL16.view(np.float16).astype(np.float32)
    rng = np.random.default_rng(0)
    values = np.concatenate([
        _ties_and_neighbours(ALL16, np.sort(widen[np.isfinite(widen) & (widen >= 0)])),
        _ties_and_neighbours(ALL16, np.sort(widen[np.isfinite(widen) & (widen <= 0)])),
        rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.array([65504, 65519.99, 65520, 65536, 1e30, np.inf, -np.inf, np.nan, 2**-25, 2**-24, 1.5 * 2**-25,
                  2**-26, -2**-25, 0.0, -0.0], np.float32),
    ])
    _same_floats(rm.tensor(values).half().numpy(), values.astype(np.float16))


def test_float64_to_float16_rounds_once() -> None:
    """Through a float32 rounded to nearest, 1 + 2^-11 + 2^-40 would become the tie 1 + 2^-11 and then 1."""
    rng = np.random.default_rng(1)
    values = np.concatenate([
        np.array([1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40, -(1 + 2**-11 + 2**-40), 65519.999999999, 65520.0,
                  2**-25 + 2**-60, 2**-25, 1e300, -1e300, 1e-300, np.nan, np.inf], np.float64),
        rng.normal(size=1 << 16) * 10.0 ** rng.integers(-9, 6, 1 << 16),
    ])
    _same_floats(rm.tensor(values, dtype=rm.float64).half().numpy(), values.astype(np.float16))


def test_every_bfloat16_widens_exactly() -> None:
    t = _bf16(ALL16)
    want = (ALL16.astype(np.uint32) << 16).view(np.float32)
    _same_floats(t.float().numpy(), want)
    _same_floats(t.double().numpy(), want.astype(np.float64))
    np.testing.assert_array_equal(_bf16_bits(t.clone()), ALL16)


def test_float32_to_bfloat16_rounds_to_nearest_even_like_torch() -> None:
    widen = (ALL16.astype(np.uint32) << 16).view(np.float32)
    rng = np.random.default_rng(2)
    values = np.concatenate([
        _ties_and_neighbours(ALL16, np.sort(widen[np.isfinite(widen) & (widen >= 0)])),
        _ties_and_neighbours(ALL16, np.sort(widen[np.isfinite(widen) & (widen <= 0)])),
        rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.array([3.4e38, np.finfo(np.float32).max, np.inf, -np.inf, 1e-45, -1e-45, 0.0, -0.0], np.float32),
    ])
    got = _bf16_bits(rm.tensor(values).to(rm.bfloat16))
    want = _torch_bf16_bits(values)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan((got[nan].astype(np.uint32) << 16).view(np.float32)).all()


def test_nan_payloads_stay_nan_in_bfloat16() -> None:
    """A NaN whose set bits all lie in the dropped half must not round into an infinity (or flip sign)."""
    nans = np.array([0x7F800001, 0x7FFFFFFF, 0xFF800001, 0xFFFFFFFF, 0x7FC00000], np.uint32).view(np.float32)
    got = (_bf16_bits(rm.tensor(nans).to(rm.bfloat16)).astype(np.uint32) << 16).view(np.float32)
    assert np.isnan(got).all()
    # the host-side conversion of rm.tensor(..., dtype=bfloat16) gives the kernel's bits
    np.testing.assert_array_equal(_bf16_bits(rm.tensor(nans, dtype=rm.bfloat16)),
                                  _bf16_bits(rm.tensor(nans).to(rm.bfloat16)))


def test_float64_to_bfloat16_rounds_once() -> None:
    tie = 1 + 2**-8  # halfway between bfloat16 1 and 1 + 2^-7
    values = np.array([tie + 2**-40, tie - 2**-40, -(tie + 2**-40), tie, 1e300, 1e-300], np.float64)
    got = _bf16_bits(rm.tensor(values, dtype=rm.float64).to(rm.bfloat16))
    want = (np.array([1 + 2**-7, 1, -(1 + 2**-7), 1, np.inf, 0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(got, want)


def _exact_int_to_bf16_bits(n: int) -> int:
    """The bfloat16 nearest the integer n (ties to even), by integer arithmetic: an independent reference."""
    mag, shift = abs(n), max(abs(n).bit_length() - 8, 0)
    q, r = divmod(mag, 1 << shift)
    if 2 * r > 1 << shift or (2 * r == 1 << shift and q & 1):
        q += 1
    value = float(q << shift) * (-1 if n < 0 else 1)
    return int(np.array([value], np.float32).view(np.uint32)[0] >> 16)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "bool"])
def test_integers_and_bools_to_16_bit_floats(dtype: str) -> None:
    rng = np.random.default_rng(3)
    if dtype == "bool":
        host = np.array([True, False, True])
    else:
        info = np.iinfo(dtype)
        edges = np.array([info.min, info.max, 0, 2049, 2051, 65519, 65520, 2**30 + 2**22 + 1], np.int64)
        host = np.concatenate([rng.integers(info.min, info.max, 4096, dtype=dtype, endpoint=True),
                               edges.clip(info.min, info.max).astype(dtype)])
    t = rm.tensor(host, dtype=getattr(rm, dtype))
    _same_floats(t.half().numpy(), host.astype(np.float64).astype(np.float16))  # exact in float64 below 2^53
    want = np.array([_exact_int_to_bf16_bits(int(v)) for v in host.tolist()], np.uint16)
    np.testing.assert_array_equal(_bf16_bits(t.to(rm.bfloat16)), want)


def test_int64_to_bfloat16_rounds_once() -> None:
    """2^60 + 2^52 + 1 lies above the bfloat16 tie 2^60 + 2^52; through float64 it would become the tie."""
    host = np.array([2**60 + 2**52 + 1, 2**60 + 2**52, -(2**60 + 2**52 + 1), 2**63 - 1, -(2**63)], np.int64)
    got = _bf16_bits(rm.tensor(host, dtype=rm.int64).to(rm.bfloat16))
    want = np.array([2.0**60 + 2.0**53, 2.0**60, -(2.0**60 + 2.0**53), 2.0**63, -(2.0**63)], np.float32)
    np.testing.assert_array_equal(got, (want.view(np.uint32) >> 16).astype(np.uint16))


def _saturated(v: float, info: np.iinfo) -> int:
    """C-undefined float -> int pinned as the CPU backend documents: truncate, saturate, NaN -> 0."""
    if v != v:
        return 0
    if v in (float("inf"), float("-inf")):
        return int(info.max) if v > 0 else int(info.min)
    return min(max(int(v), int(info.min)), int(info.max))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_16_bit_floats_to_integers_truncate_and_saturate(dtype: str) -> None:
    values = np.array([1.5, -1.5, 2.75, -2.75, 300.0, -300.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan, 0.0,
                       3.0e38, -3.0e38], np.float32)
    info = np.iinfo(dtype)
    for half in (rm.float16, rm.bfloat16):
        h = rm.tensor(values).to(half)
        want = np.array([_saturated(v, info) for v in h.float().numpy().tolist()], dtype)
        np.testing.assert_array_equal(h.to(getattr(rm, dtype)).numpy(), want)
        assert h.to(rm.bool).numpy().tolist() == (values != 0).tolist()


def _bf16_of_double(v: float) -> float:
    """The bfloat16 nearest a (normal, in-range) double, ties to even; torch rounds float64 twice here."""
    m, e = math.frexp(v)
    return math.ldexp(round(m * 256), e - 8)  # m * 256 is exact; round() breaks ties to even


def test_fill_and_strided_copies() -> None:
    for half, np_round in ((rm.float16, lambda v: np.float32(np.float16(v))), (rm.bfloat16, _bf16_of_double)):
        for value in (0.1, -3.3, 1e6, 65520.0, 1 + 2**-8 + 2**-30):
            got = rm.full((3, 5), value, dtype=half).float().numpy()
            assert (got == np.float32(np_round(value))).all(), (half, value)
        base = rm.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
        view = base.to(half).t()[1:, ::2]  # a strided view of 16-bit storage
        np.testing.assert_array_equal(view.float().numpy(), np.arange(24, dtype=np.float32).reshape(4, 6).T[1:, ::2])
        np.testing.assert_array_equal(view.contiguous().float().numpy(), view.float().numpy())

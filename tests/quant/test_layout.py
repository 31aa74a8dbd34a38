"""SPEC C / D byte layouts against hand-computed words, through the ops on the default backend."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus.backend_api import from_storage
from rumus_contracts import DTypeError, RumusError, ShapeError, int4, q8
from rumus_contracts.ops import quant as layout


def _words(t: rm.Tensor) -> np.ndarray:
    return t.numpy().view(np.uint32)


def test_q8_hand_computed_blocks_with_k_not_a_multiple_of_the_block() -> None:
    # K = 18, block 16: column 0 = two blocks, the second holding 2 real values and 14 zeros of padding
    col = np.zeros(18, np.float32)
    col[:4] = [1.0, -2.0, 0.5, 127.0]
    col[16:] = [3.0, 0.0]
    words = _words(rm.ops.q8_quantize(rm.tensor(col[:, None]), block_size=16))
    assert words.shape == (2 * (1 + 4),)
    assert words[0] == 0x3C00  # absmax 127 -> scale 1.0 (f16 0x3C00), high 16 bits zero
    assert words[1] == 0x7F00FE01  # 1, -2, round_half_even(0.5) = 0, 127: byte j of the word is element j
    assert list(words[2:5]) == [0, 0, 0]
    assert words[5] == 0x260C  # absmax 3 -> f16(3 / 127) = 0x260C
    assert words[6] == 0x7F and list(words[7:10]) == [0, 0, 0]  # 127, 0, then padding zeros


def test_q8_all_zero_block_has_scale_one_and_zero_codes() -> None:
    words = _words(rm.ops.q8_quantize(rm.zeros(16, 1), block_size=16))
    assert list(words) == [0x3C00, 0, 0, 0, 0]


def test_q8_columns_never_share_a_block() -> None:
    w = np.arange(1, 41, dtype=np.float32).reshape(20, 2)  # K=20: 2 blocks of 16 per column
    words = _words(rm.ops.q8_quantize(rm.tensor(w), block_size=16))
    assert words.size == 2 * 2 * 5
    # column 1's first block starts at word 2 blocks * 5 words and holds w[0:16, 1]
    q = words[11:15].astype("<u4").view(np.int8)
    absmax = 32.0
    assert list(q) == [int(np.rint(v * 127 / absmax)) for v in w[:16, 1]]


def test_int4_hand_computed_words_scales_and_rounded_zero_point() -> None:
    w = np.array([[0.0, 0.75], [1.5, 0.75], [3.0, 0.75]], np.float32)  # K=3 < group 8: 5 rows of padding
    words, scales, zeros = rm.ops.int4_quantize.multi(rm.tensor(w), group_size=8)
    # column 0: min 0, max 3 -> scale 0.2, zp 0; codes 0, rint(7.5) = 8, 15 in nibbles 0, 1, 2
    # column 1: constant -> scale 1.0, zp = clamp(rint(-0.75), 0, 15) = 0 (rounded), codes rint(0.75) = 1
    assert list(_words(words)) == [0x0F80, 0x0111]
    np.testing.assert_array_equal(scales.numpy(), np.array([[np.float32(3.0) / np.float32(15), 1.0]], np.float32))
    np.testing.assert_array_equal(zeros.numpy(), [[0.0, 0.0]])
    assert not np.signbit(zeros.numpy()).any()


def test_int4_words_are_k_major_across_groups() -> None:
    k, n, g = 20, 3, 8  # K % group != 0: 3 groups, padded_k 24
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, n)).astype(np.float32)
    words, scales, zeros = rm.ops.int4_quantize.multi(rm.tensor(w), group_size=g)
    wv = _words(words)
    assert wv.shape == (24 // 8 * n,) and scales.shape == (3, n)
    codes = layout.int4_codes(w, scales.numpy(), zeros.numpy(), g)
    for kk in range(k):
        for nn in range(n):
            assert (wv[(kk // 8) * n + nn] >> (4 * (kk % 8))) & 0xF == codes[kk, nn]
    for kk in range(k, 24):  # padding nibbles are zero
        assert all((wv[(kk // 8) * n + nn] >> (4 * (kk % 8))) & 0xF == 0 for nn in range(n))


@pytest.mark.parametrize("bs", layout.Q8_BLOCK_SIZES)
def test_q8_roundtrip_error_is_at_most_half_a_step(bs: int) -> None:
    rng = np.random.default_rng(bs)
    k, n = 3 * bs + 5, 7
    w = (rng.standard_normal((k, n)) * rng.uniform(0.01, 10, (1, n))).astype(np.float32)
    words = rm.ops.q8_quantize(rm.tensor(w), block_size=bs)
    qt = from_storage(_words(words), q8(bs))
    back = rm.ops.q8_dequantize(qt, k=k, n=n).numpy()
    nb = -(-k // bs)
    for c in range(n):
        for b in range(nb):
            rows = slice(b * bs, min(k, (b + 1) * bs))
            absmax = np.abs(w[rows, c]).max()
            step = np.float32(np.float16(absmax / np.float32(127)))
            # q * f16(scale) vs x: half a code step plus the f16 rounding of the scale times |q| <= 127
            bound = step / 2 + 127 * abs(step - absmax / 127) + 1e-6
            assert np.abs(back[rows, c] - w[rows, c]).max() <= bound


@pytest.mark.parametrize("g", layout.INT4_GROUP_SIZES)
def test_int4_roundtrip_error_is_at_most_half_a_step(g: int) -> None:
    rng = np.random.default_rng(g)
    k, n = 2 * g + 3, 5
    w = rng.standard_normal((k, n)).astype(np.float32)
    words, scales, zeros = rm.ops.int4_quantize.multi(rm.tensor(w), group_size=g)
    back = rm.ops.int4_dequantize(from_storage(_words(words), int4(g)), scales, zeros, k=k).numpy()
    rows = np.arange(k) // g
    step = scales.numpy()[rows]
    lo = np.stack([w[i * g:(i + 1) * g].min(0) for i in range(rows[-1] + 1)])[rows]
    hi = np.stack([w[i * g:(i + 1) * g].max(0) for i in range(rows[-1] + 1)])[rows]
    err = np.abs(back - w)
    # where the group straddles 0 the zero point lands in [0, 15]: half a step for rounding the value plus
    # half a step for rounding the zero point. Elsewhere SPEC D clamps zp and the grid loses range.
    straddles = (lo <= 0) & (hi >= 0)
    assert (err[straddles] <= step[straddles] + 1e-6).all()
    assert (err <= np.maximum(np.abs(lo), np.abs(hi)) + step).all()


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(DTypeError, match="block_size"):
        rm.ops.q8_quantize(rm.zeros(4, 4), block_size=12)
    with pytest.raises(ShapeError, match="2-D"):
        rm.ops.int4_quantize.multi(rm.zeros(4), group_size=8)
    w = from_storage(np.zeros(layout.q8_num_words(40, 2, 32), np.uint32), q8(32))
    with pytest.raises(ShapeError, match="packed weight"):
        rm.ops.q8_linear(rm.zeros(1, 70), w, n=2)  # 3 blocks per column needed, 2 given
    with pytest.raises(DTypeError):
        q8(6)
    with pytest.raises(RumusError, match="NaN"):
        rm.ops.q8_quantize(rm.tensor([[1.0], [float("nan")]]), block_size=16)

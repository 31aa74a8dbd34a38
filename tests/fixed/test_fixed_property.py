"""Property: FixedLinear equals SPEC E's formula, evaluated on Python's arbitrary-precision ints,
on every element, for random int16 inputs, weights, biases and scales (and any thread count)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumus.fixed as fx

I16 = st.integers(-32768, 32767)


def spec_requantize(acc: int, s: int) -> int:
    """SPEC E, word for word: s = 0 -> acc; else round half away from zero; then saturate."""
    if s == 0:
        r = acc
    elif acc >= 0:
        r = (acc + 2 ** (s - 1)) // 2**s
    else:
        r = -((-acc + 2 ** (s - 1)) // 2**s)
    return min(max(r, -32768), 32767)


def spec_linear(x: list[list[int]], w: list[list[int]], b: list[int] | None, s: int) -> list[list[int]]:
    out = []
    for row in x:
        out_row = []
        for n in range(len(w[0]) if w else 0):
            acc = sum(row[k] * w[k][n] for k in range(len(w)))
            if b is not None:
                acc += b[n] * 2**s  # b << s, before rounding and saturation
            out_row.append(spec_requantize(acc, s))
        out.append(out_row)
    return out


EDGES = np.array([-32768, -32767, -1, 0, 1, 32766, 32767], dtype=np.int64)


@st.composite
def layers(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]], list[int] | None, int]:
    """Shapes, scale and value mix drawn by hypothesis; values from a seeded numpy generator (drawing
    thousands of ints one by one through hypothesis would take most of the test's time)."""
    m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 48)), draw(st.integers(1, 24))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # wide values, values near the extremes (saturation), small values (rounding ties at every scale)
    mode = draw(st.sampled_from(["wide", "extremes", "small", "mixed"]))

    def values(shape: tuple[int, ...]) -> np.ndarray:
        wide = rng.integers(-32768, 32768, shape)
        if mode == "wide":
            return wide
        if mode == "extremes":
            return rng.choice(EDGES, shape)
        if mode == "small":
            return rng.integers(-4, 5, shape)
        return np.where(rng.random(shape) < 0.3, rng.choice(EDGES, shape), wide)

    bias = values((n,)).tolist() if draw(st.booleans()) else None
    return values((m, k)).tolist(), values((k, n)).tolist(), bias, draw(st.integers(0, 15))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_fixed_linear_matches_the_spec_formula(case: tuple[list[list[int]], list[list[int]], list[int] | None,
                                                            int]) -> None:
    x, w, b, s = case
    layer = fx.FixedLinear(w, b, s)
    got = layer(fx.tensor(x, (len(x), len(w)), s)).fixed_i16_data().tolist()
    assert got == spec_linear(x, w, b, s)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=30), st.integers(0, 15))
def test_requantize_kernel_matches_the_spec_formula(accs: list[int], s: int) -> None:
    assert fx.requantize(accs, s).fixed_i16_data().tolist() == [spec_requantize(a, s) for a in accs]


@settings(max_examples=100, deadline=None)
@given(st.lists(I16, min_size=0, max_size=50), st.integers(0, 15))
def test_relu_matches(values: list[int], s: int) -> None:
    out = fx.relu(fx.tensor(values, (len(values),), s))
    assert out.fixed_i16_data().tolist() == [max(v, 0) for v in values]


def test_spec_reference_agrees_with_the_exact_cases() -> None:
    # the oracle above is itself checked against SPEC E's listed values
    assert [spec_requantize(a, s) for a, s in [(5, 1), (-5, 1), (-7, 2), (1, 2), (-100000, 1)]] == [3, -3, -2, 0,
                                                                                                  -32768]
    assert spec_linear([[20000, 20000]], [[256], [256]], [-10000], 8) == [[30000]]
    assert np.int16(spec_linear([[32767]], [[-32768]], None, 0)[0][0]) == -32768

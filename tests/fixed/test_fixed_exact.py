"""Every exact case of SPEC E, and every conformance sample of the fixed-point op schemas, on the kernels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import canonical_parts

import rumus.fixed as fx
from rumus import _runtime
from rumus import Tensor
from rumus.fixed import _ops
from rumus.fixed.tensor import from_raw
from rumus_contracts import DType, DTypeError, ShapeError, fixed_i16
from rumus_contracts.ops import fixed as fixed_schemas

REQUANTIZE_CASES = [
    (2, 1, 1), (3, 1, 2), (5, 1, 3), (1, 1, 1), (-1, 1, -1), (-3, 1, -2), (-5, 1, -3), (7, 2, 2), (-7, 2, -2),
    (6, 2, 2), (2, 2, 1), (1, 2, 0), (-1, 2, 0), (-6, 2, -2), (12345, 0, 12345), (100000, 1, 32767),
    (-100000, 1, -32768), (40000, 0, 32767), (-40000, 0, -32768),
]


@pytest.mark.parametrize("acc,s,want", REQUANTIZE_CASES)
def test_requantize_scalar(acc: int, s: int, want: int) -> None:
    assert fx.requantize(acc, s) == want


@pytest.mark.parametrize("acc,s,want", REQUANTIZE_CASES)
def test_requantize_kernel(acc: int, s: int, want: int) -> None:
    out = fx.requantize([acc], s)
    assert out.dtype == fixed_i16(s)
    assert out.fixed_i16_data().tolist() == [want]


def test_requantize_int64_extremes_never_wrap() -> None:
    big, small = 2**63 - 1, -(2**63)
    for s in range(16):
        assert fx.requantize([big, small], s).fixed_i16_data().tolist() == [32767, -32768]
        assert fx.requantize(big, s) == 32767 and fx.requantize(small, s) == -32768


def test_requantize_takes_int64_tensors_and_strided_views() -> None:
    import rumus as rm
    acc = rm.tensor(np.array([[7, -7, 6], [2, 1, -6]], dtype=np.int64))
    assert fx.requantize(acc.T, 2).fixed_i16_data().tolist() == [[2, 1], [-2, 0], [2, -2]]


@pytest.mark.parametrize("x,w,b,s,want", [
    ([[16, 32]], [[16], [48]], None, 4, [[112]]),
    ([[20000, 20000]], [[256], [256]], [-10000], 8, [[30000]]),
    ([[32767]], [[32767]], None, 0, [[32767]]),
    ([[32767]], [[-32768]], None, 0, [[-32768]]),
])
def test_fixed_linear_spec_cases(x: list[list[int]], w: list[list[int]], b: list[int] | None, s: int,
                                 want: list[list[int]]) -> None:
    layer = fx.FixedLinear(w, b, s)
    out = layer(fx.tensor(x, (len(x), len(x[0])), s))
    assert out.dtype == fixed_i16(s) and out.fixed_i16_data().tolist() == want


def test_bias_is_added_before_saturation() -> None:
    # x.w = 20000*256*2 >> 8 = 40000 saturates to 32767; 32767 - 10000 would be 22767. SPEC E: 30000.
    layer = fx.FixedLinear([[256], [256]], [-10000], 8)
    assert layer(fx.tensor([20000, 20000], (1, 2), 8)).fixed_i16_data().tolist() == [[30000]]


def test_relu_spec_case_keeps_dtype() -> None:
    for s in (0, 7, 15):
        out = fx.relu(fx.tensor([-32768, -100, -1, 0, 1, 100, 32767], (7,), s))
        assert out.dtype == fixed_i16(s)
        assert out.fixed_i16_data().tolist() == [0, 0, 0, 0, 1, 100, 32767]


def test_canonical_mlp_values() -> None:
    l1, l2, x = canonical_parts()
    h = l1(x)
    assert h.fixed_i16_data().tolist() == [[512, 0]]
    assert l2(fx.relu(h)).fixed_i16_data().tolist() == [[768]]


def test_named_semantics() -> None:
    assert fx.ROUNDING == "nearest_ties_away_from_zero" and fx.OVERFLOW == "saturate_i16"
    assert fx.SEMANTICS == {"rounding": fx.ROUNDING, "overflow": fx.OVERFLOW}
    assert fx.FixedLinear.rounding == fx.ROUNDING and fx.FixedLinear.overflow == fx.OVERFLOW


# ---- the op schemas' conformance samples, run through the registered CPU kernels --------------------

SCHEMAS = ("fixed_linear", "fixed_linear_nobias", "fixed_relu", "fixed_requantize")


def _tensor(raw: np.ndarray, dtype: DType) -> Tensor:
    return from_raw(raw, dtype)


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_samples_match_reference(name: str) -> None:
    schema = _runtime.plugins().ops.get(name)
    assert schema.samples is not None and schema.reference is not None
    samples = list(schema.samples(np.random.default_rng(0)))
    assert samples
    for sample in samples:
        assert sample.dtypes is not None and not sample.grad
        inputs = [_tensor(a, d) for a, d in zip(sample.inputs, sample.dtypes)]
        got = _ops.call(name, *inputs, **sample.attrs).fixed_i16_data()
        want = schema.reference(*sample.inputs, **sample.attrs)
        assert got.dtype == np.int16 and got.shape == want.shape, sample.name
        np.testing.assert_array_equal(got, want, err_msg=sample.name)


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_error_samples_raise(name: str) -> None:
    schema = _runtime.plugins().ops.get(name)
    for err in schema.error_samples() if schema.error_samples else []:
        assert err.dtypes is not None
        dtypes = err.dtypes
        inputs = [_tensor(a, d) for a, d in zip(err.inputs, dtypes)]
        with pytest.raises(err.error, match=err.match):
            _ops.call(name, *inputs, **err.attrs)


def test_every_spec_case_is_a_sample() -> None:
    """SPEC E's exact cases are in the schemas' samples, so every backend's conformance run checks them."""
    ops = _runtime.plugins().ops
    req = {(int(v), s["scale_log2"]) for smp in ops.get("fixed_requantize").samples(np.random.default_rng(0))
           for s in [smp.attrs] for v in np.asarray(smp.inputs[0]).reshape(-1)}
    assert {(acc, s) for acc, s, _ in REQUANTIZE_CASES} <= req
    names = {smp.name for op in ("fixed_linear", "fixed_linear_nobias")
             for smp in ops.get(op).samples(np.random.default_rng(0))}
    assert {case[4] for case in fixed_schemas.EXACT_LINEAR} <= names
    relu_samples = ops.get("fixed_relu").samples(np.random.default_rng(0))
    relu_inputs = [tuple(np.asarray(smp.inputs[0]).reshape(-1).tolist()) for smp in relu_samples]
    assert fixed_schemas.EXACT_RELU_INPUT in relu_inputs


def test_mismatched_scales_and_shapes_are_refused() -> None:
    w = fx.tensor([1, 2, 3, 4], (2, 2), 4)
    with pytest.raises(DTypeError, match="scale"):
        fx.linear(fx.tensor([1, 2], (1, 2), 5), w)
    with pytest.raises(ShapeError, match="do not fit"):
        fx.linear(fx.tensor([1, 2, 3], (1, 3), 4), w)
    with pytest.raises(DTypeError, match="0..15"):
        fx.requantize(5, 16)

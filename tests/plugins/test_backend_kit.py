"""rumus_contracts.kit: the strided view, the cast rule and the expression-table reference kernels that a
backend over host memory builds on (examples/backend-numpy is one)."""

from __future__ import annotations

import numpy as np
import pytest

from rumus_contracts import TensorArg, bfloat16, bool_, float16, float32, float64, int8, int32, int64, uint8
from rumus_contracts.kit import convert, host_copy, strided_view, table_dtypes, table_kernel, table_kernels
from rumus_contracts.ops.expressions import all_kernels
from rumus_contracts.ops.memory import _copy_ref


def arg(buf: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> TensorArg:
    dtype = {np.dtype(d.numpy): d for d in (float32, float64, float16, int64, int32, int8, uint8, bool_)}[buf.dtype]
    return TensorArg(buf, shape, strides, offset, dtype)


def test_strided_view_applies_shape_strides_and_offset_and_writes_through() -> None:
    buf = np.arange(12, dtype=np.float32)
    t = arg(buf, (3, 2), (1, 4), 1)  # a transposed, offset view
    np.testing.assert_array_equal(strided_view(t), [[1, 5], [2, 6], [3, 7]])
    strided_view(t)[0, 1] = -1
    assert buf[5] == -1
    np.testing.assert_array_equal(strided_view(arg(buf, (2, 3), (0, 1), 2)), [[2, 3, 4], [2, 3, 4]])  # stride 0


def test_strided_view_of_size_0_past_the_buffer_end() -> None:
    buf = np.arange(5, dtype=np.float64)
    t = arg(buf, (0, 3), (3, 1), 7)  # an empty slice whose offset lies past the end: numpy refuses that view
    with pytest.raises(ValueError):
        np.ndarray(t.shape, buf.dtype, buf, t.offset * 8, (24, 8))
    v = strided_view(t)
    assert v.shape == (0, 3) and v.dtype == np.float64
    v[...] = 1.0  # writing nothing is fine
    assert host_copy(t).shape == (0, 3)


def test_host_copy_is_contiguous_and_owns_its_data() -> None:
    buf = np.arange(6, dtype=np.int64)
    out = host_copy(arg(buf, (3, 2), (1, 3)))
    assert out.flags.c_contiguous and not np.shares_memory(out, buf)
    np.testing.assert_array_equal(out, [[0, 3], [1, 4], [2, 5]])


EDGES = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9, -3e9, 2.75, -2.75, 300.0, -300.0, -0.0, 0.5])


@pytest.mark.parametrize("target", ["int64", "int32", "int8", "uint8", "bool", "float32", "float64"])
def test_convert_follows_the_copy_ops_reference(target: str) -> None:
    from rumus_contracts import parse_dtype
    dt = parse_dtype(target)
    for values in (EDGES, EDGES.astype(np.float32)):
        np.testing.assert_array_equal(convert(values, dt), np.asarray(_copy_ref(values, target)).astype(dt.numpy))
    ints = np.array([-129, 128, 255, 256, 2**40 + 3, -1], np.int64)
    np.testing.assert_array_equal(convert(ints, dt), np.asarray(_copy_ref(ints, target)).astype(dt.numpy))


def test_convert_saturates_and_sends_nan_to_zero() -> None:
    got = convert(np.array([np.nan, np.inf, -np.inf, 2.75, -2.75, 1e3]), int8)
    np.testing.assert_array_equal(got, [0, 127, -128, 2, -2, 127])
    np.testing.assert_array_equal(convert(np.array([300, -1], np.int64), uint8), [44, 255])  # ints wrap, as in C


def test_table_kernel_keeps_int64_exact_and_wraps() -> None:
    big = np.array([2**62 + 1, -(2**62) - 3, 7], np.int64)
    out = np.empty(3, np.int64)
    table_kernel("add")([arg(out, (3,), (1,))], [arg(big, (3,), (1,)), arg(big, (3,), (1,))], {})
    assert out.tolist() == [((2 * int(v) + 2**63) % 2**64) - 2**63 for v in big]  # through float64 it would not be


def test_table_kernel_may_write_over_its_input_and_takes_params() -> None:
    buf = np.array([-2.0, -0.5, 0.0, 3.0], np.float32)
    x = arg(buf, (4,), (1,))
    table_kernel("leaky_relu")([x], [x], {"negative_slope": 0.25})  # in place
    np.testing.assert_array_equal(buf, np.array([-0.5, -0.125, 0.0, 3.0], np.float32))


def test_table_kernel_rounds_once_from_float64() -> None:
    x = np.linspace(-3, 3, 41).astype(np.float16)
    out = np.empty(41, np.float16)
    table_kernel("gelu_tanh")([arg(out, (41,), (1,))], [arg(x, (41,), (1,))], {})
    xd = x.astype(np.float64)
    want = (0.5 * xd * (1 + np.tanh(0.7978845608028654 * (xd + 0.044715 * xd**3)))).astype(np.float16)
    np.testing.assert_array_equal(out, want)


def test_table_claims_follow_the_table_and_the_held_dtypes() -> None:
    held = (float32, float64, int64, bool_, bfloat16)
    assert table_dtypes("exp", held) == (float32, float64)  # float ops; bfloat16 words have no numpy arithmetic
    assert table_dtypes("add", held) == (float32, float64, int64)
    assert bool_ in table_dtypes("eq", held)
    entries = table_kernels(held)
    names = {op for op, _, _ in entries}
    assert names == {op for op in all_kernels() if table_dtypes(op, held)}
    assert "relu_backward" in names and all(bfloat16 not in d for _, _, d in entries)

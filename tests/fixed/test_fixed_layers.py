"""FixedLinear / FixedSequential construction checks, input layouts, threads, and backends."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
import rumus.fixed as fx
from rumus import _runtime
from rumus_contracts import DTypeError, RumusError, ShapeError, fixed_i16


def numpy_linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, s: int) -> np.ndarray:
    """SPEC E vectorised in numpy int64 (exact: |acc| stays far below 2**63 for these sizes)."""
    acc = x.astype(np.int64) @ w.astype(np.int64)
    if b is not None:
        acc += b.astype(np.int64) << s
    if s:
        half = np.int64(1) << (s - 1)
        acc = np.where(acc >= 0, (acc + half) >> s, -((-acc + half) >> s))
    return np.clip(acc, -32768, 32767).astype(np.int16)


def test_from_parts_checks() -> None:
    w = fx.tensor(np.arange(6), (2, 3), 5)
    b = fx.tensor([1, 2, 3], (3,), 5)
    layer = fx.FixedLinear.from_parts(w, b)
    assert (layer.in_features, layer.out_features, layer.scale_log2) == (2, 3, 5)
    assert fx.FixedLinear.from_parts(w, None).bias is None
    with pytest.raises(ShapeError, match="2-D"):
        fx.FixedLinear.from_parts(fx.tensor(np.arange(6), (6,), 5), None)
    with pytest.raises(ShapeError, match="1-D"):
        fx.FixedLinear.from_parts(w, fx.tensor([1, 2, 3], (1, 3), 5))
    with pytest.raises(ShapeError, match="out_features"):
        fx.FixedLinear.from_parts(w, fx.tensor([1, 2], (2,), 5))
    with pytest.raises(ShapeError, match="contiguous"):
        fx.FixedLinear.from_parts(w.T, None)
    with pytest.raises(ShapeError, match="contiguous"):
        fx.FixedLinear.from_parts(w, fx.tensor([1, 0, 2, 0, 3, 0], (6,), 5)[::2])
    with pytest.raises(DTypeError, match="scale"):
        fx.FixedLinear.from_parts(w, fx.tensor([1, 2, 3], (3,), 4))
    with pytest.raises(DTypeError, match="fixed-point"):
        fx.FixedLinear.from_parts(rm.zeros(2, 3), None)
    with pytest.raises(ShapeError, match="2-D"):
        fx.FixedLinear([1, 2, 3], None, 5)
    with pytest.raises(DTypeError):
        fx.FixedLinear([[0.5]], None, 5)


def test_layer_input_checks_and_layouts() -> None:
    rng = np.random.default_rng(1)
    w = rng.integers(-300, 300, (5, 4)).astype(np.int16)
    b = rng.integers(-300, 300, (4,)).astype(np.int16)
    layer = fx.FixedLinear(w, b, 6)
    x = rng.integers(-3000, 3000, (3, 5)).astype(np.int16)
    want = numpy_linear(x, w, b, 6)
    np.testing.assert_array_equal(layer(fx.tensor(x, x.shape, 6)).fixed_i16_data(), want)
    # 1-D input -> 1-D output; N-D input keeps its leading dims
    assert layer(fx.tensor(x[1], (5,), 6)).fixed_i16_data().tolist() == want[1].tolist()
    x3 = np.stack([x, x])
    np.testing.assert_array_equal(layer(fx.tensor(x3, x3.shape, 6)).fixed_i16_data(), np.stack([want, want]))
    # a transposed (strided) input goes to the kernel without a copy and gives the same bits
    xt = fx.tensor(x.T.copy(), (5, 3), 6).T
    assert not xt.is_contiguous()
    np.testing.assert_array_equal(layer(xt).fixed_i16_data(), want)
    # a transposed weight view through the functional form
    wt = fx.tensor(w.T.copy(), (4, 5), 6).T
    np.testing.assert_array_equal(fx.linear(fx.tensor(x, x.shape, 6), wt).fixed_i16_data(),
                                  numpy_linear(x, w, None, 6))
    with pytest.raises(DTypeError, match="scale"):
        layer(fx.tensor(x, x.shape, 5))
    with pytest.raises(DTypeError, match="fixed-point"):
        layer(rm.zeros(3, 5))
    with pytest.raises(ShapeError):
        layer(fx.tensor(x[:, :4].copy(), (3, 4), 6))


def test_relu_strided_and_empty() -> None:
    t = fx.tensor([[-1, 2], [3, -4]], (2, 2), 3)
    assert fx.relu(t.T).fixed_i16_data().tolist() == [[0, 3], [2, 0]]
    assert fx.relu(fx.tensor([], (0, 4), 3)).shape == (0, 4)
    assert fx.relu(fx.tensor(-5, (), 3)).fixed_i16_data().tolist() == 0


def test_empty_dims() -> None:
    layer = fx.FixedLinear(np.zeros((0, 3), np.int16), [1, -1, 2], 2)
    out = layer(fx.tensor([], (4, 0), 2))  # k = 0: the accumulator is just bias << s
    assert out.fixed_i16_data().tolist() == [[1, -1, 2]] * 4
    assert fx.FixedLinear(np.zeros((3, 2), np.int16), None, 2)(fx.tensor([], (0, 3), 2)).shape == (0, 2)


def test_large_layer_is_exact_on_any_thread_count() -> None:
    from rumus_cpu.threads import get_num_threads, set_num_threads
    rng = np.random.default_rng(7)
    x = rng.integers(-32768, 32768, (37, 300)).astype(np.int16)
    w = rng.integers(-32768, 32768, (300, 530)).astype(np.int16)
    b = rng.integers(-32768, 32768, (530,)).astype(np.int16)
    want = numpy_linear(x, w, b, 11)
    layer = fx.FixedLinear(w, b, 11)
    before = get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            set_num_threads(threads)
            results.append(layer(fx.tensor(x, x.shape, 11)).fixed_i16_data())
    finally:
        set_num_threads(before)
    for got in results:
        np.testing.assert_array_equal(got, want)


def test_sequential_checks_and_forward() -> None:
    l1 = fx.FixedLinear([[256, -256], [256, 256]], None, 8)
    l2 = fx.FixedLinear([[256], [256]], [256], 8)
    model = fx.FixedSequential(l1, fx.FixedReLU(), l2)
    assert len(model) == 3 and model[0] is l1 and list(model)[2] is l2 and model.scale_log2 == 8
    assert model(fx.tensor([256, 256], (1, 2), 8)).fixed_i16_data().tolist() == [[768]]
    assert "FixedLinear(in_features=2" in repr(model)
    with pytest.raises(DTypeError, match="scale"):
        fx.FixedSequential(l1, fx.FixedLinear([[1]], None, 4))
    with pytest.raises(ShapeError, match="features"):
        fx.FixedSequential(l2, l1)
    with pytest.raises(DTypeError, match="scale_log2"):
        fx.FixedSequential(fx.FixedReLU())
    assert fx.FixedSequential(fx.FixedReLU(), scale_log2=3).scale_log2 == 3
    with pytest.raises(RumusError, match="FixedLinear and FixedReLU"):
        fx.FixedSequential(l1, rm.nn.ReLU())  # type: ignore[arg-type]


def test_only_the_cpu_backend_has_fixed_kernels() -> None:
    kernels = _runtime.plugins().kernels
    for op in ("fixed_linear", "fixed_linear_nobias", "fixed_relu"):
        assert kernels.backends_for(op, fixed_i16(8)) == ["cpu"]
        assert kernels.find(op, "wgpu", fixed_i16(8)) is None  # WebGPU: KernelNotFound at dispatch
    assert kernels.backends_for("fixed_requantize", rm.int64) == ["cpu"]


def test_a_backend_without_fixed_kernels_raises_kernel_not_found() -> None:
    from rumus._storage import Storage
    from rumus.fixed import _ops
    from rumus.tensor import make_tensor
    from rumus_contracts import Device, KernelNotFound

    class NoFixedBackend:  # stands in for WebGPU: a backend that registers no fixed-point kernel
        name = "wgpu"

    dev = Device("wgpu", 0)
    t = make_tensor(Storage(np.zeros(2, np.int16), dev, fixed_i16(4), NoFixedBackend(), 2), (2,))  # type: ignore[arg-type]
    with pytest.raises(KernelNotFound, match="cpu"):
        _ops.call("fixed_relu", t)

"""The wgpu nn kernels (conv, pooling, norms, dropout) called directly, beyond the schema samples that
test_wgpu_kernels.py already runs: dropout masks bit-equal to the CPU kernel's, both conv column
layouts and chunked batches, max-pool ties and NaNs as the CPU kernel resolves them, long and packed
norm rows, offsets; and the fixed-point ops staying unclaimed. Runs on Mesa's lavapipe in CI."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wgpu_direct import BACKEND as WGPU  # skips this module without wgpu or an adapter
from wgpu_direct import CAPS, DEV, OPS

from rumus_contracts import (
    BackendUnavailable, Device, DType, KernelNotFound, KernelRegistry, TensorArg, contiguous_strides, float16,
    float32,
)
from rumus_contracts.ops.nn import dropout_keep
from rumus_wgpu import nn_conv
from rumus_wgpu.kernels import CLAIMS

F32_TOL = (1e-5, 1e-5)


def _cpu() -> Any:
    try:
        from rumus_cpu.backend import CpuBackend
        return CpuBackend()
    except (ImportError, BackendUnavailable) as exc:  # pragma: no cover - CPU kernels not compiled
        pytest.skip(f"no CPU backend to compare with: {exc}")


def upload(x: np.ndarray, dtype: DType = float32, pad: int = 0, backend: Any = WGPU) -> TensorArg:
    """x on the backend, contiguous after `pad` elements (a nonzero tensor offset)."""
    x = np.asarray(x).astype(dtype.numpy)
    flat = np.concatenate([np.full(pad, 7, dtype.numpy), x.reshape(-1)])
    dev = DEV if backend is WGPU else Device("cpu", 0)
    return TensorArg(backend.from_numpy(dev, flat, dtype), x.shape, contiguous_strides(x.shape), pad, dtype)


def empty(shape: tuple[int, ...], dtype: DType = float32, backend: Any = WGPU) -> TensorArg:
    dev = DEV if backend is WGPU else Device("cpu", 0)
    n = int(np.prod(shape))
    return TensorArg(backend.allocate(dev, n, dtype), shape, contiguous_strides(shape), 0, dtype)


def run(op: str, inputs: list[np.ndarray], attrs: dict[str, Any], dtype: DType = float32, pad: int = 0,
        backend: Any = WGPU) -> list[np.ndarray]:
    """The backend's kernel for op on inputs (uploaded with `pad` elements of offset); host results."""
    schema = OPS.get(op)
    attrs = schema.bind_attrs(attrs)
    args = [upload(x, dtype, pad, backend) for x in inputs]
    shapes = schema.shape([a.shape for a in args], attrs)
    outs = [empty(tuple(s), d, backend) for s, d in zip(shapes, schema.dtype([dtype] * len(args), attrs))]
    backend.kernels[op](outs, args, attrs)
    return [backend.to_numpy(o) for o in outs]


def reference(op: str, inputs: list[np.ndarray], attrs: dict[str, Any], dtype: DType = float32) -> list[np.ndarray]:
    schema = OPS.get(op)
    res = schema.reference(*(np.asarray(x).astype(dtype.numpy).astype(np.float64) for x in inputs),
                           **schema.bind_attrs(attrs))
    return list(res) if isinstance(res, tuple) else [res]


def check(op: str, inputs: list[np.ndarray], attrs: dict[str, Any], tol: tuple[float, float] = F32_TOL,
          pad: int = 3) -> None:
    for got, want in zip(run(op, inputs, attrs, pad=pad), reference(op, inputs, attrs)):
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=f"{op} {attrs}")


# -- dropout: the CPU kernel's mask, bit for bit -----------------------------------------------------

DROPOUT_CASES = [(0.5, 0, 0, (3, 129)), (0.1, 12345, 7, (4099,)), (0.9, 2 ** 32 - 1, 2 ** 32 - 50, (100,)),
                 (0.3, 987654321, 2 ** 31 + 5, (2, 5, 33)), (0.0, 3, 1, (17,)), (0.999, 11, 0, (1000,))]


@pytest.mark.parametrize(("p", "seed", "offset", "shape"), DROPOUT_CASES)
def test_dropout_mask_matches_cpu(p: float, seed: int, offset: int, shape: tuple[int, ...]) -> None:
    cpu = _cpu()
    x = np.random.default_rng(seed % 1000).uniform(1.0, 2.0, shape).astype(np.float32)  # nonzero: mask = out != 0
    attrs = {"p": p, "seed": seed, "offset": offset}
    (got,) = run("dropout", [x], attrs, pad=5)  # a tensor offset must not shift the counter
    (want,) = run("dropout", [x], attrs, backend=cpu)
    np.testing.assert_array_equal(got != 0, want != 0)
    np.testing.assert_array_equal(got != 0, dropout_keep(x.size, p, seed, offset).reshape(shape))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))  # x * float32(1 / (1 - p)), exactly
    if float16 in CAPS.dtypes:
        (half,) = run("dropout", [x], attrs, float16)
        np.testing.assert_array_equal(half != 0, want != 0)


# -- conv2d: both column layouts, chunked batches --------------------------------------------------

CONV_CASES = [  # (x shape, weight shape, stride, padding, dilation, groups)
    ((5, 4, 9, 11), (6, 2, 3, 3), (1, 2), (1, 1), (1, 1), 2),
    ((3, 3, 12, 10), (4, 3, 3, 2), (2, 1), (2, 0), (2, 3), 1),
    ((4, 6, 7, 7), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 6),
    ((2, 2, 20, 17), (3, 2, 5, 4), (3, 2), (2, 2), (1, 1), 1),
]


@pytest.mark.parametrize("layout", ["per_sample", "channel_major", "chunked"])
def test_conv_layouts(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nn_conv, "PER_SAMPLE_MIN_L", 0 if layout == "per_sample" else 1 << 30)
    if layout == "chunked":  # room for about two samples' columns per chunk
        monkeypatch.setattr(nn_conv, "SCRATCH_BYTES", 2 * 6 * 9 * 9 * 11 * 4)
    rng = np.random.default_rng(3)
    for xs, ws, s, p, d, g in CONV_CASES:
        attrs = {"stride": s, "padding": p, "dilation": d, "groups": g}
        x, w = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
        check("conv2d", [x, w], attrs)
        (y,) = reference("conv2d", [x, w], attrs)
        gy = rng.uniform(-1, 1, y.shape)
        check("conv2d_backward_input", [gy, w], {**attrs, "input_size": xs[2:]})
        check("conv2d_backward_weight", [gy, x], {**attrs, "kernel_size": ws[2:]}, tol=(1e-5, 2e-5))


def test_conv_lenet_shapes_match_cpu() -> None:
    """Mini-LeNet's and the demo CNN's layers, batched, against the CPU kernels."""
    cpu = _cpu()
    rng = np.random.default_rng(5)
    for xs, ws, pad in (((4, 1, 8, 8), (4, 1, 3, 3), 0), ((64, 1, 8, 8), (16, 1, 3, 3), 1),
                        ((64, 16, 8, 8), (32, 16, 3, 3), 1), ((64, 32, 4, 4), (64, 32, 3, 3), 1)):
        attrs = {"stride": (1, 1), "padding": (pad, pad), "dilation": (1, 1), "groups": 1}
        x, w = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
        (y,) = run("conv2d", [x, w], attrs)
        np.testing.assert_allclose(y, run("conv2d", [x, w], attrs, backend=cpu)[0], rtol=1e-5, atol=1e-5)
        gy = rng.uniform(-1, 1, y.shape)
        for op, ins, extra in (("conv2d_backward_input", [gy, w], {"input_size": xs[2:]}),
                               ("conv2d_backward_weight", [gy, x], {"kernel_size": ws[2:]})):
            got, want = run(op, ins, {**attrs, **extra})[0], run(op, ins, {**attrs, **extra}, backend=cpu)[0]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{op} {xs}")


# -- pooling: ties and NaNs as the CPU kernel resolves them ----------------------------------------

POOL_CASES = [
    {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)},
    {"kernel_size": (2, 2), "stride": (2, 2)},
    {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1), "dilation": (2, 1), "ceil_mode": True},
]


@pytest.mark.parametrize("attrs", POOL_CASES, ids=lambda a: str(a["kernel_size"] + a["stride"]))
def test_max_pool_ties_and_nans_match_cpu(attrs: dict[str, Any]) -> None:
    cpu = _cpu()
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, (2, 3, 9, 8)).astype(np.float32)  # many equal maxima per window
    x_nan = x.copy()
    x_nan[0, 1, 2, 3] = x_nan[1, 2, 5, 5] = x_nan[1, 2, 5, 6] = np.nan
    for data in (x, x_nan):
        (y,) = run("max_pool2d", [data], attrs, pad=1)
        (y_cpu,) = run("max_pool2d", [data], attrs, backend=cpu)
        np.testing.assert_array_equal(y, y_cpu)
        g = rng.uniform(-1, 1, y.shape)
        (gx,) = run("max_pool2d_backward", [g, data], attrs, pad=2)
        (gx_cpu,) = run("max_pool2d_backward", [g, data], attrs, backend=cpu)
        np.testing.assert_array_equal(gx, gx_cpu)  # same winners, same accumulation order


def test_avg_pool_matches_cpu() -> None:
    cpu = _cpu()
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, (3, 2, 11, 9))
    for attrs in ({"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True},
                  {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 1), "count_include_pad": False},
                  {"kernel_size": (2, 2), "stride": (1, 1), "divisor_override": 3}):
        (y,) = run("avg_pool2d", [x], attrs, pad=1)
        np.testing.assert_allclose(y, run("avg_pool2d", [x], attrs, backend=cpu)[0], rtol=1e-6, atol=1e-6)
        g = rng.uniform(-1, 1, y.shape)
        back = {**attrs, "input_size": x.shape[2:]}
        np.testing.assert_allclose(run("avg_pool2d_backward", [g], back, pad=1)[0],
                                   run("avg_pool2d_backward", [g], back, backend=cpu)[0], rtol=1e-6, atol=1e-6)


# -- norms: long rows (one workgroup each), short rows (packed), offset data -----------------------

def test_row_norms() -> None:
    rng = np.random.default_rng(4)
    for xs, ws in (((3, 1000), (1000,)), ((300, 3), (3,)), ((2, 5, 6, 7), (6, 7)), ((4, 257), (257,))):
        # long rows get an offset: the mean must be subtracted before squaring (short rows of offset data
        # may have a tiny variance, whose float32 rounding the backward amplifies past any fixed tolerance)
        x = rng.uniform(-2, 2, xs) + (5.0 if xs[-1] > 100 else 0.0)
        w, b, g = rng.uniform(0.5, 1.5, ws), rng.uniform(-1, 1, ws), rng.uniform(-1, 1, xs)
        check("layer_norm", [x, w, b], {"eps": 1e-5}, tol=(1e-5, 2e-5))
        check("layer_norm_backward", [g, x, w], {"eps": 1e-5}, tol=(1e-4, 1e-4))
        check("rms_norm", [x, w], {"eps": 1e-6})
        check("rms_norm_backward", [g, x, w], {"eps": 1e-6}, tol=(1e-4, 1e-4))


def test_group_and_batch_norm() -> None:
    rng = np.random.default_rng(6)
    for xs, groups in (((3, 8, 33, 5), 4), ((2, 6, 300), 3), ((5, 4), 2)):
        x, g = rng.uniform(-2, 2, xs), rng.uniform(-1, 1, xs)
        w, b = rng.uniform(0.5, 1.5, xs[1:2]), rng.uniform(-1, 1, xs[1:2])
        check("group_norm", [x, w, b], {"num_groups": groups, "eps": 1e-5}, tol=(1e-5, 2e-5))
        check("group_norm_backward", [g, x, w], {"num_groups": groups, "eps": 1e-5}, tol=(1e-4, 1e-4))
    for xs in ((64, 3, 9, 9), (1000, 5), (2, 3, 1)):
        x, g = rng.uniform(-2, 2, xs) + 3.0, rng.uniform(-1, 1, xs)
        w, b = rng.uniform(0.5, 1.5, xs[1:2]), rng.uniform(-1, 1, xs[1:2])
        check("batch_norm_stats", [x], {}, tol=(1e-5, 1e-5))
        mean, var = reference("batch_norm_stats", [x], {})
        for training in (True, False):
            attrs = {"eps": 1e-5, "training": training}
            check("batch_norm", [x, w, b, mean, var], attrs, tol=(1e-5, 2e-5))
            check("batch_norm_backward", [g, x, w, mean, var], attrs, tol=(1e-4, 1e-4))


# -- what wgpu must not claim --------------------------------------------------------------------

FIXED_OPS = ("fixed_linear", "fixed_linear_nobias", "fixed_relu", "fixed_requantize")


def test_nn_ops_are_claimed_and_fixed_point_ops_are_not() -> None:
    from rumus_wgpu import plugin

    registry = KernelRegistry()
    plugin.rumus_register_kernels(registry)
    for op in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "max_pool2d", "max_pool2d_backward",
               "avg_pool2d", "avg_pool2d_backward", "batch_norm", "batch_norm_stats", "batch_norm_backward",
               "layer_norm", "layer_norm_backward", "group_norm", "group_norm_backward", "rms_norm",
               "rms_norm_backward", "dropout"):
        assert registry.find(op, "wgpu", float32) is not None, op
    for op in FIXED_OPS:
        assert op not in CLAIMS and op not in WGPU.kernels
        for dtype in OPS.get(op).dtypes:
            assert registry.find(op, "wgpu", dtype) is None, (op, dtype)


def test_fixed_point_ops_raise_kernel_not_found_through_the_core() -> None:
    from rumus import _runtime

    backend = _runtime.backend("wgpu")
    for op in FIXED_OPS:
        with pytest.raises(KernelNotFound):
            _runtime.kernel(op, backend, OPS.get(op).dtypes[0])

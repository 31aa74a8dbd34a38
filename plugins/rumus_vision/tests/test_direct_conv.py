"""The direct convolution kernels against the core's im2col kernels and the float64 references, forward and
both gradients, on the default device (RUMUS_BACKEND); the per-shape choice; finite-difference gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import backend_api as api
from rumus.nn import functional as F
from rumus_contracts import ChooseByShape, TensorArg, contiguous_strides
from rumus_contracts.ops.nn_conv import conv2d_reference
from rumus_vision import conv_mode_as
from rumus_vision.plugin import CONV_OPS

DEVICE = rm.default_device()
BACKEND = DEVICE.backend
DTYPES = ["float32", "float64"] if BACKEND == "cpu" else ["float32"]

# (x shape, weight shape, stride, padding, dilation, groups): dense, depthwise, grouped, strided, dilated
SHAPES = [
    ((2, 3, 9, 8), (5, 3, 3, 3), 1, 1, 1, 1),
    ((2, 6, 11, 10), (6, 1, 3, 3), 2, 1, 1, 6),
    ((1, 8, 10, 9), (12, 2, 3, 2), (1, 2), (2, 1), (2, 1), 4),
    ((2, 4, 7, 7), (8, 4, 1, 1), 2, 0, 1, 1),
    ((2, 3, 12, 12), (4, 3, 7, 7), 2, 3, 1, 1),
    ((3, 5, 6, 9), (10, 1, 5, 5), 1, 2, 1, 5),
    ((2, 2, 64, 64), (2, 1, 3, 3), 1, 1, 1, 2),  # N*Ho*Wo = 8192: 256 lanes per weight element on wgpu
]


def _run(mode: str, dtype: str, xs: Any, ws: Any, s: Any, p: Any, d: Any, g: int,
         seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rm.tensor(rng.uniform(-1, 1, xs), dtype=dtype, device=DEVICE, requires_grad=True)
    w = rm.tensor(rng.uniform(-1, 1, ws), dtype=dtype, device=DEVICE, requires_grad=True)
    with conv_mode_as(mode):
        y = F.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g)
        gy = rm.tensor(rng.uniform(-1, 1, y.shape), dtype=dtype, device=DEVICE)
        (y * gy).sum().backward()
    assert x.grad is not None and w.grad is not None
    return y.numpy(), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SHAPES, ids=[f"x{c[0]}w{c[1]}g{c[5]}" for c in SHAPES])
def test_direct_equals_im2col(case: Any, dtype: str) -> None:
    """The same convolution, forward and both gradients, through each path."""
    direct, im2col = _run("direct", dtype, *case), _run("im2col", dtype, *case)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for name, a, b in zip(("y", "grad x", "grad w"), direct, im2col):
        scale = max(float(np.abs(b).max()), 1.0)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, err_msg=name)


def _pair(v: Any) -> Any:
    return (v, v) if isinstance(v, int) else v


@pytest.mark.parametrize("case", SHAPES, ids=[f"x{c[0]}w{c[1]}g{c[5]}" for c in SHAPES])
def test_direct_forward_matches_float64_reference(case: Any) -> None:
    xs, ws, s, p, d, g = case
    y, _, _ = _run("direct", DTYPES[-1], *case, seed=3)
    rng = np.random.default_rng(3)
    x, w = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
    want = conv2d_reference(x, w, _pair(s), _pair(p), _pair(d), g)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(BACKEND != "cpu", reason="finite differences need float64 (the cpu backend)")
@pytest.mark.parametrize("case", [SHAPES[1], SHAPES[2], SHAPES[4]], ids=["depthwise", "grouped", "dense7x7"])
def test_direct_gradients_match_finite_differences(case: Any) -> None:
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(7)
    x0, w0 = rng.uniform(-1, 1, xs), rng.uniform(-1, 1, ws)
    gy = None

    def loss(xv: np.ndarray, wv: np.ndarray) -> float:
        nonlocal gy
        with conv_mode_as("direct"), rm.no_grad():
            y = F.conv2d(rm.tensor(xv, dtype="float64"), rm.tensor(wv, dtype="float64"), stride=s, padding=p,
                         dilation=d, groups=g).numpy()
        if gy is None:
            gy = rng.uniform(-1, 1, y.shape)
        return float((y * gy).sum())

    loss(x0, w0)
    x = rm.tensor(x0, dtype="float64", requires_grad=True)
    w = rm.tensor(w0, dtype="float64", requires_grad=True)
    with conv_mode_as("direct"):
        (F.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g) * rm.tensor(gy, dtype="float64")).sum().backward()
    assert x.grad is not None and w.grad is not None
    eps = 1e-6
    for arr, grad, other, first in ((x0, x.grad.numpy(), w0, True), (w0, w.grad.numpy(), x0, False)):
        for flat in rng.choice(arr.size, size=12, replace=False):
            idx = np.unravel_index(flat, arr.shape)
            up, down = arr.copy(), arr.copy()
            up[idx] += eps
            down[idx] -= eps
            fd = ((loss(up, other) - loss(down, other)) if first else (loss(other, up) - loss(other, down))) / (2 * eps)
            assert abs(fd - grad[idx]) <= 1e-6 * max(1.0, abs(fd)), (first, idx, fd, grad[idx])


def _args(*shapes: tuple[int, ...]) -> list[TensorArg]:
    return [TensorArg(None, s, contiguous_strides(s), 0, rm.float32) for s in shapes]


def test_auto_mode_picks_direct_only_for_few_channels_per_group() -> None:
    """The dispatcher's kernel is a ChooseByShape: the plugin's kernel for depthwise/narrow groups, the core's
    im2col for dense convs (where direct loses), and the mode override."""
    be = api.backend(BACKEND)
    chooser = api.kernel("conv2d", be, rm.float32)
    assert isinstance(chooser, ChooseByShape) and chooser.fallback is not None
    direct = chooser.choices[0][1]
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 64}
    assert chooser.pick(_args((8, 64, 56, 56), (64, 1, 3, 3)), attrs) is direct
    dense = {**attrs, "groups": 1}
    assert chooser.pick(_args((8, 64, 56, 56), (64, 64, 3, 3)), dense) is chooser.fallback
    with conv_mode_as("direct"):
        assert chooser.pick(_args((8, 64, 56, 56), (64, 64, 3, 3)), dense) is direct
    with conv_mode_as("im2col"):
        assert chooser.pick(_args((8, 64, 56, 56), (64, 1, 3, 3)), attrs) is chooser.fallback
    wchooser = api.kernel("conv2d_backward_weight", be, rm.float32)
    assert isinstance(wchooser, ChooseByShape)
    # the weight gradient's inputs are (grad, x): channels per group come from x and groups
    assert wchooser.pick(_args((8, 64, 56, 56), (8, 64, 56, 56)), attrs) is wchooser.choices[0][1]
    assert wchooser.pick(_args((8, 64, 56, 56), (8, 64, 56, 56)), dense) is wchooser.fallback


@pytest.mark.skipif(BACKEND != "cpu", reason="the outputs-per-group rule is the CPU's")
def test_cpu_auto_mode_leaves_one_channel_to_many_outputs_to_the_core() -> None:
    """A grayscale stem (1 input channel, 16 outputs: the MNIST CNN's first layer) ran 4-5x slower direct than
    through the core's im2col + GEMM on the CPU; channel multipliers of 2 still go direct."""
    be = api.backend(BACKEND)
    stem = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    for op, shapes in (("conv2d", ((64, 1, 28, 28), (16, 1, 3, 3))),
                       ("conv2d_backward_input", ((64, 16, 28, 28), (16, 1, 3, 3))),
                       ("conv2d_backward_weight", ((64, 16, 28, 28), (64, 1, 28, 28)))):
        chooser = api.kernel(op, be, rm.float32)
        assert isinstance(chooser, ChooseByShape)
        assert chooser.pick(_args(*shapes), stem) is chooser.fallback, op
    chooser = api.kernel("conv2d", be, rm.float32)
    doubled = {**stem, "groups": 64}  # 64 channels, 128 outputs: 2 per group
    assert chooser.pick(_args((8, 64, 56, 56), (128, 1, 3, 3)), doubled) is chooser.choices[0][1]
    assert chooser.pick(_args((8, 32, 56, 56), (128, 1, 3, 3)), {**stem, "groups": 32}) is chooser.fallback


def test_plugin_registers_conditional_kernels_in_front_of_the_core() -> None:
    reg = api.plugins()
    assert "vision" in reg.loaded and not reg.all_failures()
    for op in CONV_OPS:
        entries = reg.kernels.candidates(op, BACKEND, rm.float32)
        assert [e.owner for e in entries] == ["vision", BACKEND]
        assert entries[0].priority == 1 and entries[0].applies is not None and entries[0].samples is not None


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="auto, direct, im2col"):
        with conv_mode_as("fast"):
            pass

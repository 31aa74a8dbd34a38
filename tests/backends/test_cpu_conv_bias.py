"""conv2d with a bias on the CPU backend: the bias is added in the fused convolution's epilogue (op
conv2d_bias, csrc/internal/nn_conv_impl.h). Its results must equal conv2d followed by a broadcast add bit for
bit (the same additions in the same order), match PyTorch in float64 (values and all three gradients), stay
bit-identical at every thread count, and the bias must still be checked like the unfused path checks it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402
from rumus.ops import get as op  # noqa: E402
from rumus_contracts import ShapeError  # noqa: E402

from thread_count_runs import run_at_each_thread_count  # noqa: E402

# (x shape, w shape, stride, padding, dilation, groups): the CNN's two layers, several bands per image, groups
CASES = [
    ((4, 1, 28, 28), (16, 1, 3, 3), 1, 1, 1, 1),
    ((4, 16, 14, 14), (32, 16, 3, 3), 1, 1, 1, 1),
    ((2, 64, 40, 40), (48, 64, 3, 3), 1, 1, 1, 1),
    ((3, 6, 11, 9), (12, 3, 5, 5), 2, 3, 2, 2),
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"x{c[0]}w{c[1]}")
def test_fused_bias_equals_conv_then_add_bit_for_bit(case: Any, dt: Any) -> None:
    xs, ws, s, p, d, g = case
    rng = np.random.default_rng(1)
    x, w = rm.tensor(rng.standard_normal(xs).astype(dt)), rm.tensor(rng.standard_normal(ws).astype(dt))
    b = rm.tensor(rng.standard_normal(ws[0]).astype(dt))
    attrs = {"stride": (s, s), "padding": (p, p), "dilation": (d, d), "groups": g}
    fused = op("conv2d_bias")(x, w, b, **attrs).numpy()
    unfused = (op("conv2d")(x, w, **attrs) + b.reshape(1, -1, 1, 1)).numpy()
    from rumus.autograd.kernel_lookup import conditional_kernel_takes
    if conditional_kernel_takes("conv2d", x, [x.shape, w.shape], attrs):  # a plugin's conv2d: other sums
        np.testing.assert_allclose(fused, unfused, rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-5)
    else:
        np.testing.assert_array_equal(fused, unfused)
    assert np.abs(fused - op("conv2d")(x, w, **attrs).numpy()).max() > 0.1  # the bias really was added


def _traced(fn: Any) -> tuple[Any, list[str]]:
    """fn()'s result and the names of the ops it dispatched."""
    from rumus import _dispatch
    seen: list[str] = []
    prev = _dispatch._tracer

    def tracer(schema: Any, *_: Any) -> None:
        seen.append(schema.name)
    _dispatch._tracer = tracer
    try:
        return fn(), seen
    finally:
        _dispatch._tracer = prev


def test_a_plugins_conditional_conv_kernel_keeps_its_calls() -> None:
    """rumus-vision's direct kernel takes convs of <= 2 channels per group: with it installed, such a conv
    keeps conv2d (the plugin's kernel) and adds the bias separately, with the same values."""
    from rumus.autograd.kernel_lookup import conditional_kernel_takes
    x, w, b = rm.randn(2, 1, 7, 7), rm.randn(4, 1, 3, 3), rm.randn(4)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    if not conditional_kernel_takes("conv2d", x, [x.shape, w.shape], attrs):
        pytest.skip("no plugin registers a conditional conv2d kernel for this shape")
    y, seen = _traced(lambda: F.conv2d(x, w, b, padding=1))
    assert "conv2d" in seen and "conv2d_bias" not in seen
    np.testing.assert_array_equal(y.numpy(), (op("conv2d")(x, w, **attrs) + b.reshape(1, -1, 1, 1)).numpy())


def test_functional_conv2d_uses_the_fused_op_and_matches_torch_with_gradients() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    xa, wa, ba = rng.standard_normal((3, 6, 9, 8)), rng.standard_normal((6, 3, 3, 3)), rng.standard_normal(6)
    x, w, b = (rm.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    y, seen = _traced(lambda: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2))
    assert "conv2d_bias" in seen and "conv2d" not in seen and "add" not in seen
    gy = rng.standard_normal(tuple(y.shape))
    (y * rm.tensor(gy)).sum().backward()
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride=(2, 1), padding=1, groups=2)
    (ty * torch.tensor(gy)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    for mine, theirs in ((x, tx), (w, tw), (b, tb)):
        assert mine.grad is not None and theirs.grad is not None
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_a_bias_of_the_wrong_length_is_refused_as_before() -> None:
    x, w = rm.randn(2, 3, 5, 5), rm.randn(4, 3, 3, 3)
    with pytest.raises(ShapeError):
        F.conv2d(x, w, rm.randn(3))
    with pytest.raises(ShapeError, match="one value per output channel"):
        op("conv2d_bias")(x, w, rm.randn(3))


SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus.nn import functional as F
from rumus_cpu import threads
rng = np.random.default_rng(0)
res = {}
for i, (xs, ws) in enumerate((((8, 16, 30, 30), (32, 16, 3, 3)), ((64, 1, 28, 28), (16, 1, 3, 3)))):
    x = rm.tensor(rng.standard_normal(xs).astype(np.float32), requires_grad=True)
    w = rm.tensor(rng.standard_normal(ws).astype(np.float32) * 0.1, requires_grad=True)
    b = rm.tensor(rng.standard_normal(ws[0]).astype(np.float32), requires_grad=True)
    y = F.conv2d(x, w, b, padding=1)
    (y * y).sum().backward()
    res[f"y{i}"], res[f"gx{i}"] = y.numpy(), x.grad.numpy()
    res[f"gw{i}"], res[f"gb{i}"] = w.grad.numpy(), b.grad.numpy()
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads()}))
"""


def test_bit_identical_at_every_thread_count(tmp_path: Any) -> None:
    runs = run_at_each_thread_count(SCRIPT, tmp_path)
    assert [info["threads"] for info, _ in runs] == [1, 2, 3, 4]
    first = runs[0][1]
    for _, arrays in runs[1:]:
        for key in first.files:
            np.testing.assert_array_equal(arrays[key], first[key], err_msg=key)

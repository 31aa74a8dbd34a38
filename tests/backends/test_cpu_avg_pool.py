"""avg_pool2d and its backward on the CPU (one window walk serves both directions, csrc/internal/
nn_conv_impl.h): float64 against PyTorch on odd shapes with padding, ceil mode, count_include_pad off and a
divisor override; a strided (transposed) input; the same bits at 1 and 4 threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus.nn import functional as F

torch = pytest.importorskip("torch")

CASES = [
    ((2, 3, 7, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((1, 2, 5, 6), {"kernel_size": (2, 3), "stride": (1, 2), "ceil_mode": True}),
    ((3, 1, 8, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False, "ceil_mode": True}),
    ((2, 4, 6, 6), {"kernel_size": 2, "divisor_override": 3}),
]


@pytest.mark.parametrize("shape,kw", CASES)
def test_forward_and_backward_match_torch(shape: tuple[int, ...], kw: dict[str, Any]) -> None:
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape)
    w = rm.tensor(x, requires_grad=True)
    y = F.avg_pool2d(w, **kw)
    g = rng.standard_normal(y.shape)
    y.backward(rm.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.avg_pool2d(tx, **kw)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-14)


def test_strided_input() -> None:
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 7)).astype(np.float32)
    xt = rm.tensor(x).transpose(2, 3)  # the kernel reads a contiguous copy; the result must not depend on it
    got = F.avg_pool2d(xt, 3, 2, 1).numpy()
    want = torch.nn.functional.avg_pool2d(torch.tensor(x).transpose(2, 3), 3, 2, 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_same_bits_at_every_thread_count() -> None:
    from rumus_cpu import threads
    x = rm.tensor(np.random.default_rng(4).standard_normal((16, 32, 33, 31)).astype(np.float32), requires_grad=True)
    before = threads.get_num_threads()
    outs = []
    try:
        for n in (1, 4):
            threads.set_num_threads(n)
            x.grad = None
            y = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)
            y.backward(rm.ones(*y.shape))
            outs.append((y.numpy().copy(), x.grad.numpy().copy()))
    finally:
        threads.set_num_threads(before)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])

"""layer_norm / rms_norm backward on wgpu: the weight and bias gradients are column sums over the rows,
folded in two deterministic passes (coalesced reads). Values against PyTorch float64 for row lengths
around the vec4 width and a workgroup's reach, row counts below and above a split, and the same bits
on every run."""

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.nn import functional as F
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(4)
LENGTHS = [1, 3, 4, 5, 255, 256, 257, 1000, 4096, 32001]


def _grads(kind: str, rows: int, n: int, device: str):
    x = RNG.standard_normal((rows, n)) * 2 + 0.5
    w = RNG.uniform(0.5, 1.5, n)
    b = RNG.uniform(-1, 1, n)
    g = RNG.standard_normal((rows, n))
    xr = rm.tensor(x, dtype="float32", device=device, requires_grad=True)
    wr = rm.tensor(w, dtype="float32", device=device, requires_grad=True)
    br = rm.tensor(b, dtype="float32", device=device, requires_grad=True)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    if kind == "layer_norm":
        yr = F.layer_norm(xr, (n,), wr, br)
        yt = torch.nn.functional.layer_norm(xt, (n,), wt, bt)
    else:
        yr = F.rms_norm(xr, (n,), wr, eps=1e-6)
        yt = torch.nn.functional.rms_norm(xt, (n,), wt, eps=1e-6)
    yr.backward(rm.tensor(g, dtype="float32", device=device))
    yt.backward(torch.tensor(g))
    got = [xr.grad.numpy(), wr.grad.numpy()] + ([br.grad.numpy()] if kind == "layer_norm" else [])
    want = [xt.grad.numpy(), wt.grad.numpy()] + ([bt.grad.numpy()] if kind == "layer_norm" else [])
    return got, want, rows


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("rows", [3, 70])
def test_backward_matches_torch_float64(kind, n, rows):
    if n >= 4096:
        rows = min(rows, 20)
    got, want, rows = _grads(kind, rows, n, DEVICE)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * np.sqrt(rows))


def test_parameter_gradients_are_deterministic():
    x = rm.tensor(RNG.standard_normal((512, 256)), dtype="float32", device=DEVICE, requires_grad=True)
    w = rm.tensor(np.ones(256), dtype="float32", device=DEVICE, requires_grad=True)
    g = rm.tensor(RNG.standard_normal((512, 256)), dtype="float32", device=DEVICE)
    first = None
    for _ in range(3):
        w.grad = None
        F.layer_norm(x, (256,), w).backward(g)
        if first is None:
            first = w.grad.numpy()
        else:
            assert np.array_equal(w.grad.numpy(), first)

"""Row-wise ops on wgpu: forward and backward record GPU work only (the backend's sync counter does not
move until the test reads a result), and the results match PyTorch's float64 CPU answers."""

import numpy as np
import pytest
import torch
from backends_under_test import wgpu_backend_or_skip

import rumus as rm
from rumus.nn import functional as F

BACKEND = wgpu_backend_or_skip()
DEVICE = "wgpu:0"

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 40))
TARGET = RNG.integers(0, 40, 6)
TARGET[2] = 7  # the ignored class below
WEIGHT = RNG.uniform(0.5, 2.0, 40)
X4 = RNG.standard_normal((2, 4, 3, 8))

CASES = {
    "softmax": lambda m, x: m.softmax(x, dim=1),
    "log_softmax": lambda m, x: m.log_softmax(x, dim=0),
    "cross_entropy": lambda m, x: m.cross_entropy(x, m.t, weight=m.w, ignore_index=7, label_smoothing=0.1),
    "cross_entropy_sum": lambda m, x: m.cross_entropy(x, m.t, reduction="sum"),
    "logsumexp": lambda m, x: m.logsumexp(x, 1),
    "layer_norm": lambda m, x: m.layer_norm(x, (40,)),
    "rms_norm": lambda m, x: m.rms_norm(x, (40,)),
    "amax": lambda m, x: m.amax(x, 1),
}


class _Rumus:
    def __init__(self) -> None:
        self.t = rm.tensor(TARGET, device=DEVICE)
        self.w = rm.tensor(WEIGHT, dtype="float32", device=DEVICE)

    def __getattr__(self, name):
        return getattr(F, name, None) or getattr(rm, name)


class _Torch:
    def __init__(self) -> None:
        self.t = torch.from_numpy(TARGET)
        self.w = torch.from_numpy(WEIGHT)

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name, None) or getattr(torch, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_backward_never_wait_for_the_gpu(name):
    fn = CASES[name]
    x = rm.tensor(X, dtype="float32", device=DEVICE, requires_grad=True)
    r = _Rumus()
    BACKEND.flush(0)
    before = BACKEND.stats(0)["syncs"]
    y = fn(r, x)
    g = rm.tensor(RNG.standard_normal(y.shape), dtype="float32", device=DEVICE) if y.shape else None
    y.backward(g)
    assert BACKEND.stats(0)["syncs"] == before, f"{name} forward+backward waited for the GPU"
    tx = torch.tensor(X, requires_grad=True)
    ty = fn(_Torch(), tx)
    ty.backward(torch.from_numpy(g.numpy().astype(np.float64)) if g is not None else None)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_argmax_and_group_norm_record_without_sync():
    x = rm.tensor(X4, dtype="float32", device=DEVICE, requires_grad=True)
    BACKEND.flush(0)
    before = BACKEND.stats(0)["syncs"]
    idx = rm.argmax(x, 3)
    y = F.group_norm(x, 2)
    y.backward(rm.ones(y.shape, device=DEVICE))
    assert BACKEND.stats(0)["syncs"] == before
    tx = torch.tensor(X4, requires_grad=True)
    ty = torch.nn.functional.group_norm(tx, 2)
    ty.backward(torch.ones_like(ty))
    np.testing.assert_array_equal(idx.numpy(), np.argmax(X4, 3))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 5), (5, 12), (2, 1000), (1, 5003)])
def test_softmax_rows_of_every_length_match_float64(shape):
    # short rows packed many per workgroup, vec4 and scalar paths, one long row per workgroup
    x = RNG.standard_normal(shape) * 10
    got = rm.softmax(rm.tensor(x, dtype="float32", device=DEVICE), 1).numpy()
    want = torch.softmax(torch.from_numpy(x), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    got = rm.log_softmax(rm.tensor(x.T.copy(), dtype="float32", device=DEVICE), 0).numpy()
    np.testing.assert_allclose(got, torch.log_softmax(torch.from_numpy(x.T.copy()), 0).numpy(), rtol=1e-5,
                               atol=1e-5)

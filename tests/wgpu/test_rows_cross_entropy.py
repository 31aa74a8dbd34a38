"""The fused cross-entropy ops (cross_entropy_fwd / cross_entropy_bwd) and F.cross_entropy over them, on
every backend: values against float64 numpy for row lengths around the vec4 width and a workgroup's reach,
ignore_index / label_smoothing / class weights / all rows ignored, non-contiguous logits, gradients against
finite differences and against PyTorch, no host sync on wgpu, and one dispatch per direction."""

import numpy as np
import pytest
import torch
from backends_under_test import devices

import rumus as rm
from rumus import IndexOutOfRange
from rumus.nn import functional as F
from rumus.ops import get as op
from rumus_contracts.ops.cross_entropy import cross_entropy_bwd_reference, cross_entropy_fwd_reference

DEVICES = devices()
CLASSES = [1, 3, 4, 5, 255, 256, 257, 1000, 4096, 32001]
RNG = np.random.default_rng(5)


def cpu(a: object, **kw: object) -> rm.Tensor:
    return rm.tensor(a, device="cpu", **kw)


def _case(m: int, c: int, weighted: bool, ignore: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = RNG.standard_normal((m, c)) * 3
    t = RNG.integers(0, c, m)
    t[::3] = ignore
    w = RNG.uniform(0.2, 2.0, c) if weighted else np.zeros(())
    return x, t, w


def _tol(c: int) -> float:
    return 2e-5 * max(1.0, np.log(c))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("c", CLASSES)
@pytest.mark.parametrize(("weighted", "smoothing"), [(False, 0.0), (True, 0.0), (False, 0.2), (True, 0.3)])
def test_fused_ops_match_float64(device, c, weighted, smoothing):
    m = 7 if c < 4096 else 3
    x, t, w = _case(m, c, weighted, -100)
    attrs = {"ignore_index": -100, "label_smoothing": smoothing}
    xs = rm.tensor(x, dtype="float32", device=device)
    ts = rm.tensor(t, device=device)
    ws = rm.tensor(w, dtype="float32", device=device)
    x32, w32 = x.astype(np.float32).astype(np.float64), w.astype(np.float32).astype(np.float64)
    loss, lse = op("cross_entropy_fwd").multi(xs, ts, ws, **attrs)
    want_loss, want_lse = cross_entropy_fwd_reference(x32, t, w32, **attrs)
    tol = _tol(c)
    np.testing.assert_allclose(lse.numpy(), want_lse, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=tol, atol=tol * max(1.0, np.abs(want_loss).max()))
    g = RNG.uniform(-1, 1, m)
    dx = op("cross_entropy_bwd")(rm.tensor(g, dtype="float32", device=device), xs, ts, ws,
                                 rm.tensor(want_lse, dtype="float32", device=device), **attrs)
    want_dx = cross_entropy_bwd_reference(g.astype(np.float32), x32, t, w32, want_lse.astype(np.float32), **attrs)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=1e-4, atol=1e-6)
    assert (dx.numpy()[t == -100] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_int32_targets_and_a_custom_ignore_index(device):
    x, t, w = _case(9, 12, True, 4)
    attrs = {"ignore_index": 4, "label_smoothing": 0.1}
    loss, _ = op("cross_entropy_fwd").multi(rm.tensor(x, dtype="float32", device=device),
                                            rm.tensor(t.astype(np.int32), device=device),
                                            rm.tensor(w, dtype="float32", device=device), **attrs)
    want, _ = cross_entropy_fwd_reference(x, t, w, **attrs)
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-5, atol=1e-5)
    assert (loss.numpy()[t == 4] == 0).all()


def _torch_pair(x: np.ndarray, t: np.ndarray, w: np.ndarray | None, device: str, **kw):
    xr = rm.tensor(x, dtype="float32", device=device, requires_grad=True)
    wr = rm.tensor(w, dtype="float32", device=device) if w is not None else None
    lr = F.cross_entropy(xr, rm.tensor(t, device=device), weight=wr, **kw)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64) if w is not None else None
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(t), weight=wt, **kw)
    cot = RNG.uniform(-1, 1, lt.shape)
    lr.backward(rm.tensor(cot, dtype="float32", device=device))
    lt.backward(torch.tensor(cot))
    return lr.numpy(), lt.detach().numpy(), xr.grad.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("weighted", "smoothing", "ignore"), [(False, 0.0, -100), (True, 0.0, 2), (False, 0.15, 2),
                                                               (True, 0.3, -100), (True, 0.3, 2)])
@pytest.mark.parametrize("shape", [(6, 10), (3, 5, 4), (2, 8, 3, 2), (9,)])
def test_f_cross_entropy_matches_torch(device, reduction, weighted, smoothing, ignore, shape):
    c = shape[1] if len(shape) > 1 else shape[0]
    x = RNG.standard_normal(shape) * 2
    t = RNG.integers(0, c, (shape[0], *shape[2:]) if len(shape) > 1 else ())
    if t.ndim:
        t.reshape(-1)[::4] = ignore
    w = RNG.uniform(0.3, 2.0, c) if weighted else None
    got, want, gx, wx = _torch_pair(x, t, w, device, reduction=reduction, label_smoothing=smoothing,
                                    ignore_index=ignore)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(gx, wx, rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weighted", [False, True])
def test_every_row_ignored_gives_torch_nan_for_mean(device, weighted):
    x = RNG.standard_normal((4, 6))
    t = np.full(4, -100)
    w = RNG.uniform(0.3, 2.0, 6) if weighted else None
    got, want, gx, wx = _torch_pair(x, t, w, device, label_smoothing=0.1)
    assert np.isnan(got) and np.isnan(want)
    got_sum, _, gx_sum, _ = _torch_pair(x, t, w, device, reduction="sum")
    assert got_sum == 0 and (gx_sum == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_logits(device):
    base = RNG.standard_normal((10, 8))
    t = RNG.integers(0, 5, 8)
    xr = rm.tensor(base, dtype="float32", device=device, requires_grad=True)
    lr = F.cross_entropy(xr[::2].mT, rm.tensor(t, device=device), label_smoothing=0.1)  # [8, 5] strided
    lr.backward()
    xt = torch.tensor(base, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt[::2].mT, torch.tensor(t), label_smoothing=0.1)
    lt.backward()
    np.testing.assert_allclose(lr.numpy(), lt.detach().numpy(), rtol=2e-5)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=2e-4, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_out_of_range_target_raises(device):
    x = rm.tensor(RNG.standard_normal((3, 4)), dtype="float32", device=device)
    with pytest.raises(IndexOutOfRange, match="cross_entropy"):
        F.cross_entropy(x, rm.tensor(np.array([0, 4, 1]), device=device)).numpy()
    with pytest.raises(IndexOutOfRange, match="cross_entropy"):
        F.cross_entropy(x, rm.tensor(np.array([0, -3, 1]), device=device)).numpy()


def test_gradient_matches_finite_differences_in_float64():
    # float64 lives on the CPU only (wgpu holds no float64), whatever RUMUS_BACKEND says
    x = RNG.standard_normal((5, 7))
    t = np.array([1, -100, 6, 0, 3])
    w = RNG.uniform(0.3, 2.0, 7)

    def loss(xv: np.ndarray) -> float:
        return float(F.cross_entropy(cpu(xv), cpu(t), weight=cpu(w), label_smoothing=0.2).item())

    xr = cpu(x, requires_grad=True)
    F.cross_entropy(xr, cpu(t), weight=cpu(w), label_smoothing=0.2).backward()
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        fd[i] = (loss(plus) - loss(minus)) / (2 * eps)
    np.testing.assert_allclose(xr.grad.numpy(), fd, rtol=1e-6, atol=1e-9)


def test_double_backward_matches_torch():
    # float64 on the CPU, as above
    x = RNG.standard_normal((4, 6))
    t = np.array([1, 5, -100, 0])
    w = RNG.uniform(0.3, 2.0, 6)
    xr = cpu(x, requires_grad=True)
    (g,) = rm.autograd.grad(F.cross_entropy(xr, cpu(t), weight=cpu(w), label_smoothing=0.1), [xr],
                            create_graph=True)
    (g * g).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.cross_entropy(xt, torch.tensor(t), weight=torch.tensor(w),
                                                                  label_smoothing=0.1), [xt], create_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("reduction", "forward"), [("mean", "cross_entropy_mean"), ("sum", "cross_entropy_fwd"),
                                                    ("none", "cross_entropy_fwd")])
def test_the_fused_ops_run(device, reduction, forward, monkeypatch):
    """F.cross_entropy calls one fused forward op (the mean's reduction inside it) and its backward
    cross_entropy_bwd: no log_softmax, no gather, no scatter into a dense one-hot."""
    import rumus.ops as ops
    called = []
    real = ops.get

    def spy(name):
        called.append(name)
        return real(name)
    import rumus.nn._functional_loss as loss_mod
    import rumus.autograd.formulas_loss as formula_mod
    monkeypatch.setattr(loss_mod, "_op", spy)
    monkeypatch.setattr(formula_mod, "_op", spy)
    x = rm.tensor(RNG.standard_normal((6, 9)), dtype="float32", device=device, requires_grad=True)
    loss = F.cross_entropy(x, rm.tensor(RNG.integers(0, 9, 6), device=device), reduction=reduction)
    loss.sum().backward()
    assert [n for n in called if n.startswith("cross_entropy")] == [forward, "cross_entropy_bwd"]
    assert not {"log_softmax", "gather", "scatter", "scatter_add", "index_select", "one_hot"} & set(called)

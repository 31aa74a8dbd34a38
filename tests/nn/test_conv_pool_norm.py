"""Convolution, pooling and normalization beyond the per-op conformance suite: second derivatives,
the composite path of the norms (backends without norm kernels), layer bookkeeping and user errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus.nn import functional_norm

torch = pytest.importorskip("torch")

DEVICE = rm.default_device()


def r(a: np.ndarray, requires_grad: bool = False) -> rm.Tensor:
    return rm.tensor(a, device=DEVICE, requires_grad=requires_grad)


def test_conv2d_second_derivatives_match_pytorch() -> None:
    """conv2d's backward ops are differentiable: a gradient penalty through a strided grouped conv."""
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 4, 7, 6)), rng.normal(size=(6, 2, 3, 2))
    kw: dict[str, Any] = {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "groups": 2}
    rx, rw = r(x, True), r(w, True)
    (gx,) = rm.autograd.grad((F.conv2d(rx, rw, **kw) ** 2).sum(), [rx], create_graph=True)
    (gx * gx).sum().backward()
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (tgx,) = torch.autograd.grad((torch.nn.functional.conv2d(tx, tw, **kw) ** 2).sum(), [tx], create_graph=True)
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(rw.grad.numpy(), tw.grad.numpy(), rtol=1e-10)


def test_avg_pool2d_second_derivative() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 6, 5))
    rx = r(x, True)
    (g,) = rm.autograd.grad((F.avg_pool2d(rx, 3, 2, 1) ** 3).sum(), [rx], create_graph=True)
    (g * g).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad((torch.nn.functional.avg_pool2d(tx, 3, 2, 1) ** 3).sum(), [tx], create_graph=True)
    (tg * tg).sum().backward()
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("training", [True, False])
def test_norm_composites_match_fused_kernels(monkeypatch: pytest.MonkeyPatch, training: bool) -> None:
    """With has_fused() False (a backend without norm kernels) the functions take their composite path."""
    rng = np.random.default_rng(2)
    x = rng.normal(0.5, 2.0, (4, 6, 3, 5))
    w, b = rng.uniform(0.5, 1.5, 6), rng.normal(size=6)
    cases = {
        "layer_norm": lambda X, W, B: F.layer_norm(X, (3, 5), W[:5].reshape(1, 5).expand(3, 5), None, 1e-5),
        "rms_norm": lambda X, W, B: F.rms_norm(X, 5, W[:5], None),
        "group_norm": lambda X, W, B: F.group_norm(X, 3, W, B, 1e-5),
        "batch_norm": lambda X, W, B: F.batch_norm(X, rm.zeros(6, dtype=rm.float64, device=DEVICE) + 0.1,
                                                   rm.ones(6, dtype=rm.float64, device=DEVICE) * 2.0, W, B,
                                                   training=training),
    }
    for name, fn in cases.items():
        outs = []
        for fused in (False, True):
            monkeypatch.setattr(functional_norm, "has_fused", lambda op, t, fused=fused: fused)
            X, W, B = r(x, True), r(w, True), r(b, True)
            y = fn(X, W, B)
            (y * r(np.cos(np.arange(y.numel())).reshape(y.shape))).sum().backward()
            outs.append([y.numpy(), X.grad.numpy(), W.grad.numpy(), None if B.grad is None else B.grad.numpy()])
        for a, b_ in zip(*outs):
            if a is not None or b_ is not None:
                np.testing.assert_allclose(a, b_, rtol=1e-9, atol=1e-12, err_msg=name)


def test_batch_norm_running_statistics_and_modes() -> None:
    bn = nn.BatchNorm2d(3, momentum=0.5).to(DEVICE, rm.float64)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    x = np.random.default_rng(3).normal(2.0, 3.0, (5, 3, 4, 4))
    bn(r(x))
    n = x.size // 3
    want_mean = 0.5 * x.mean(axis=(0, 2, 3))
    want_var = 0.5 + 0.5 * x.var(axis=(0, 2, 3)) * n / (n - 1)  # unbiased variance in the running estimate
    np.testing.assert_allclose(bn.running_mean.numpy(), want_mean, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), want_var, rtol=1e-12)
    assert int(bn.num_batches_tracked.item()) == 1
    bn.eval()
    before = bn.running_mean.numpy().copy()
    y = bn(r(x)).numpy()
    np.testing.assert_array_equal(bn.running_mean.numpy(), before)  # eval leaves the statistics alone
    np.testing.assert_allclose(y, (x - want_mean[:, None, None]) / np.sqrt(want_var[:, None, None] + 1e-5),
                               rtol=1e-10)
    with pytest.raises(rm.RumusError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3).to(DEVICE)(r(np.ones((1, 3))))
    with pytest.raises(rm.ShapeError, match="4-D"):
        bn(r(np.ones((2, 3))))


def test_conv_accepts_strided_views_and_keeps_pytorch_layouts() -> None:
    conv = nn.Conv2d(3, 4, 3, padding=1).to(DEVICE)
    assert conv.weight.shape == (4, 3, 3, 3) and conv.bias.shape == (4,)
    assert nn.ConvTranspose2d(4, 6, 3, groups=2).weight.shape == (4, 3, 3, 3)
    assert nn.Conv1d(4, 6, 5, groups=2).weight.shape == (6, 2, 5)
    assert "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" == repr(conv)
    x = np.random.default_rng(4).normal(size=(2, 5, 6, 3)).astype(np.float32)
    xt = r(x).permute(0, 3, 1, 2)  # [2, 3, 5, 6], not contiguous
    assert not xt.is_contiguous()
    np.testing.assert_allclose(conv(xt).numpy(), conv(xt.contiguous()).numpy(), rtol=1e-6)


def test_user_errors_say_what_to_do() -> None:
    x = r(np.zeros((2, 3, 8, 8), np.float32))
    with pytest.raises(rm.ShapeError, match="channels"):
        F.conv2d(x, r(np.zeros((4, 2, 3, 3), np.float32)))
    with pytest.raises(rm.ShapeError, match="3-D .* or 4-D"):
        F.conv2d(r(np.zeros((8, 8), np.float32)), r(np.zeros((4, 3, 3, 3), np.float32)))
    with pytest.raises(rm.RumusError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(rm.RumusError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(rm.RumusError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(rm.RumusError, match="return_indices"):
        F.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(rm.ShapeError, match="at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(rm.ShapeError, match="normalized_shape"):
        F.layer_norm(x, (7,))
    with pytest.raises(rm.ShapeError, match="num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(rm.ShapeError, match="output_padding"):
        F.conv_transpose2d(x, r(np.zeros((3, 2, 3, 3), np.float32)), stride=1, output_padding=1)


def test_adaptive_avg_pool2d_paths_agree() -> None:
    """Global (mean), evenly divisible (avg_pool2d) and uneven (averaging matmuls) windows."""
    x = np.random.default_rng(5).normal(size=(2, 3, 12, 10))
    for size in ((1, 1), (4, 5), (5, 3), (12, 10), (16, 13)):
        X = r(x, True)
        y = F.adaptive_avg_pool2d(X, size)
        y.sum().backward()
        tx = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.adaptive_avg_pool2d(tx, size)
        ty.sum().backward()
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, err_msg=str(size))
        np.testing.assert_allclose(X.grad.numpy(), tx.grad.numpy(), rtol=1e-12, err_msg=str(size))

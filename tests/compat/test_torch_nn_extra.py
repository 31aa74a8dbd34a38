"""The nn functions and layers added for real programs (rumus/nn/functional_vision.py, rumus/nn/layers_torch.py),
called the same way under torch and rumus: values and gradients (torch's autograd is the reference)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import rumus

from ._same_code import assert_matches_torch

RNG = np.random.default_rng(3)
IMG = RNG.normal(size=(2, 8, 4, 5))
SEQ = RNG.normal(size=(2, 3, 9))
THETA = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.2, 0.1, 0.0], [-0.1, 0.8, 0.3]]])
# no sampling point exactly on the border: there the clipped gradient jumps, and float32 rounding picks a side
THETA_OFF = THETA + np.array([[[0.0, 0.0, 0.0317], [0.0, 0.0, 0.0213]]])
GRID_IN = RNG.normal(size=(2, 3, 5, 6))
EMB = RNG.normal(size=(6, 4))
TARGET_PM = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])


def F(lib: ModuleType) -> Any:
    return lib.nn.functional


CASES: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "pixel_shuffle": ([IMG], lambda L, x: F(L).pixel_shuffle(x, 2)),
    "pixel_unshuffle": ([RNG.normal(size=(2, 3, 4, 6))], lambda L, x: F(L).pixel_unshuffle(x, 2)),
    "glu": ([IMG], lambda L, x: F(L).glu(x, 1)),
    "softmin": ([SEQ], lambda L, x: F(L).softmin(x, dim=-1)),
    "threshold": ([SEQ], lambda L, x: F(L).threshold(x, 0.1, -2.0)),
    "max_pool1d": ([SEQ], lambda L, x: F(L).max_pool1d(x, 3, 2, 1)),
    "avg_pool1d": ([SEQ], lambda L, x: F(L).avg_pool1d(x, 3, 2, 1)),
    "avg_pool1d_nopad": ([SEQ], lambda L, x: F(L).avg_pool1d(x, 3, 2, 1, count_include_pad=False)),
    "adaptive_avg_pool1d": ([SEQ], lambda L, x: F(L).adaptive_avg_pool1d(x, 4)),
    "adaptive_max_pool1d": ([SEQ], lambda L, x: F(L).adaptive_max_pool1d(x, 4)),
    "adaptive_max_pool2d": ([IMG], lambda L, x: F(L).adaptive_max_pool2d(x, (3, 2))),
    "instance_norm": ([IMG, RNG.normal(size=8), RNG.normal(size=8)],
                      lambda L, x, w, b: F(L).instance_norm(x, weight=w, bias=b)),
    "unfold": ([IMG[:, :3]], lambda L, x: F(L).unfold(x, (2, 3), dilation=1, padding=1, stride=(1, 2))),
    "fold": ([RNG.normal(size=(2, 12, 9))], lambda L, x: F(L).fold(x, (4, 5), 2, padding=1, stride=(2, 2))),
    "affine_grid": ([THETA], lambda L, t: F(L).affine_grid(t, (2, 3, 4, 5), align_corners=False)),
    "affine_grid_ac": ([THETA], lambda L, t: F(L).affine_grid(t, (2, 3, 4, 5), align_corners=True)),
    "grid_sample": ([GRID_IN, THETA], lambda L, x, t: F(L).grid_sample(
        x, F(L).affine_grid(t, (2, 3, 4, 4), align_corners=False), align_corners=False)),
    "grid_sample_border_ac": ([GRID_IN, THETA_OFF], lambda L, x, t: F(L).grid_sample(
        x, F(L).affine_grid(t, (2, 3, 3, 4), align_corners=True), padding_mode="border", align_corners=True)),
    "margin_ranking_loss": ([EMB[:, 0], EMB[:, 1]], lambda L, a, b: F(L).margin_ranking_loss(
        a, b, L.tensor(TARGET_PM, dtype=a.dtype), margin=0.2)),
    "triplet_margin_loss": ([EMB[:2], EMB[2:4], EMB[4:]], lambda L, a, p, n: F(L).triplet_margin_loss(a, p, n)),
    "cosine_embedding_loss": ([EMB[:3], EMB[3:]], lambda L, a, b: F(L).cosine_embedding_loss(
        a, b, L.tensor([1.0, -1.0, 1.0], dtype=a.dtype), margin=0.1)),
    "soft_margin_loss": ([EMB[:, 0]], lambda L, a: F(L).soft_margin_loss(a, L.tensor(TARGET_PM, dtype=a.dtype))),
    "pad_layers": ([IMG[:, :2]], lambda L, x: L.nn.ReflectionPad2d((1, 2, 0, 1))(x) .sum() * L.nn.ZeroPad2d(1)(x)
                   .mean() + L.nn.ReplicationPad2d(1)(x).sum()),
    "upsample": ([IMG[:, :2]], lambda L, x: L.nn.Upsample(scale_factor=2, mode="nearest")(x)),
    "upsampling_bilinear": ([IMG[:, :2]], lambda L, x: L.nn.UpsamplingBilinear2d(scale_factor=2)(x)),
    "unflatten": ([IMG], lambda L, x: L.nn.Unflatten(1, (2, 4))(x)),
}


TOLERANCES = {"float64": (1e-9, 1e-11), "float32": (3e-5, 3e-6)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_values_and_gradients(name: str, dtype: str) -> None:
    assert_matches_torch(torch, rumus, CASES[name], dtype, TOLERANCES)


def _same_params(ours: Any, theirs: Any) -> None:
    with torch.no_grad():
        for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == tname
            tp.copy_(torch.from_numpy(p.numpy()))


@pytest.mark.parametrize("make", [
    lambda L: L.nn.PReLU(), lambda L: L.nn.PReLU(8, init=0.1), lambda L: L.nn.InstanceNorm2d(8, affine=True),
    lambda L: L.nn.Bilinear(5, 4, 3),
], ids=["prelu", "prelu_channels", "instance_norm_affine", "bilinear"])
def test_layers_with_parameters_match_torch(make: Callable[[ModuleType], Any]) -> None:
    ours, theirs = make(rumus), make(torch)
    _same_params(ours, theirs)
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(n for n, _ in theirs.named_parameters())
    if isinstance(theirs, torch.nn.Bilinear):
        a, b = RNG.normal(size=(6, 5)).astype(np.float32), RNG.normal(size=(6, 4)).astype(np.float32)
        y, ty = ours(rumus.tensor(a), rumus.tensor(b)), theirs(torch.from_numpy(a), torch.from_numpy(b))
    else:
        x = IMG.astype(np.float32)
        y, ty = ours(rumus.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-5, atol=2e-6)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_parameter_containers_register_their_parameters(lib: ModuleType) -> None:
    class M(lib.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.ps = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.zeros(3))])
            self.pd = lib.nn.ParameterDict({"scale": lib.nn.Parameter(lib.ones(1))})

    m = M()
    assert sorted(m.state_dict()) == ["pd.scale", "ps.0", "ps.1"]
    assert len(list(m.parameters())) == 3 and len(m.ps) == 2 and "scale" in m.pd
    assert tuple(m.ps[1].shape) == (3,)


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_orthogonal_init_gives_orthonormal_rows(lib: ModuleType) -> None:
    w = lib.empty(4, 7)
    lib.nn.init.orthogonal_(w, gain=2.0)
    wn = w.detach().numpy()
    np.testing.assert_allclose(wn @ wn.T, 4.0 * np.eye(4), atol=1e-5)
    conv = lib.empty(6, 2, 3, 3)
    lib.nn.init.orthogonal_(conv)
    flat = conv.detach().numpy().reshape(6, -1)
    np.testing.assert_allclose(flat @ flat.T, np.eye(6), atol=1e-5)


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.nn.LazyLinear(3), (4, 7)), (lambda L: L.nn.LazyConv2d(5, 3, padding=1), (2, 4, 6, 6)),
    (lambda L: L.nn.LazyConv1d(2, 3, stride=2), (3, 4, 9)),
], ids=["lazy_linear", "lazy_conv2d", "lazy_conv1d"])
def test_lazy_layers_take_their_input_size_from_the_first_forward(make: Callable[[ModuleType], Any],
                                                                   shape: tuple[int, ...]) -> None:
    ours, theirs = make(rumus), make(torch)
    opt = rumus.optim.SGD(ours.parameters(), lr=0.1)  # made before the first forward, as d2l does
    x = RNG.normal(size=shape).astype(np.float32)
    y, ty = ours(rumus.tensor(x)), theirs(torch.from_numpy(x))
    assert tuple(y.shape) == tuple(ty.shape)
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _same_params(ours, theirs)
    y, ty = ours(rumus.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-5, atol=2e-5)
    before = ours.weight.numpy().copy()
    y.sum().backward()
    opt.step()
    assert not np.array_equal(ours.weight.numpy(), before)  # the optimizer trains the materialized weight


def test_lazy_batch_norm_matches_torch_after_its_first_forward() -> None:
    ours, theirs = rumus.nn.LazyBatchNorm2d(), torch.nn.LazyBatchNorm2d()
    x = RNG.normal(size=(4, 3, 5, 5)).astype(np.float32)
    y, ty = ours(rumus.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)


@pytest.mark.parametrize("args", [
    dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1, output_padding=1),
    dict(in_channels=4, out_channels=2, kernel_size=2, groups=2, dilation=2),
], ids=["strided", "grouped_dilated"])
def test_conv_transpose1d_matches_torch(args: dict[str, int]) -> None:
    ours, theirs = rumus.nn.ConvTranspose1d(**args), torch.nn.ConvTranspose1d(**args)
    assert tuple(ours.weight.shape) == tuple(theirs.weight.shape)
    _same_params(ours, theirs)
    x = RNG.normal(size=(2, args["in_channels"], 7)).astype(np.float32)
    y, ty = ours(rumus.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    want = theirs(torch.from_numpy(x), output_size=[theirs(torch.from_numpy(x)).shape[-1] - 1]) \
        if args.get("stride", 1) > 1 else None
    if want is not None:
        got = ours(rumus.tensor(x), output_size=[want.shape[-1]])
        assert tuple(got.shape) == tuple(want.shape)

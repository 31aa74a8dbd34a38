"""The torch names rumus/_torch_corpus_additions.py adds, run as the same code under torch and rumus."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import rumus


def _conv_pair() -> tuple[torch.nn.Conv1d, rumus.nn.Conv1d]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    t, r = torch.nn.Conv1d(3, 4, 3), rumus.nn.Conv1d(3, 4, 3)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(w))
        t.bias.copy_(torch.from_numpy(b))
    with rumus.no_grad():
        r.weight.copy_(rumus.from_numpy(w))
        r.bias.copy_(rumus.from_numpy(b))
    return t, r


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(dim: int | None) -> None:
    t, r = _conv_pair()
    torch.nn.utils.weight_norm(t, dim=dim)
    rumus.nn.utils.weight_norm(r, dim=dim)
    assert [n for n, _ in t.named_parameters()] == [n for n, _ in r.named_parameters()]
    np.testing.assert_allclose(r.weight_g.detach().numpy(), t.weight_g.detach().numpy(), rtol=1e-6)
    x = np.random.default_rng(1).standard_normal((2, 3, 7)).astype(np.float32)
    yt, yr = t(torch.from_numpy(x)), r(rumus.from_numpy(x))
    np.testing.assert_allclose(yr.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    (yt * yt).sum().backward()
    (yr * yr).sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        np.testing.assert_allclose(getattr(r, name).grad.numpy(), getattr(t, name).grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


def test_weight_norm_follows_updates_and_removes() -> None:
    t, r = _conv_pair()
    torch.nn.utils.weight_norm(t)
    rumus.nn.utils.weight_norm(r)
    with torch.no_grad():
        t.weight_g.mul_(2.0)
    with rumus.no_grad():
        r.weight_g.mul_(2.0)
    x = np.ones((1, 3, 5), dtype=np.float32)
    np.testing.assert_allclose(r(rumus.from_numpy(x)).detach().numpy(), t(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    torch.nn.utils.remove_weight_norm(t)
    rumus.nn.utils.remove_weight_norm(r)
    assert [n for n, _ in r.named_parameters()] == [n for n, _ in t.named_parameters()]
    np.testing.assert_allclose(r.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        rumus.nn.utils.remove_weight_norm(r)


def test_weight_norm_twice_refused_like_torch() -> None:
    t, r = _conv_pair()
    torch.nn.utils.weight_norm(t)
    rumus.nn.utils.weight_norm(r)
    with pytest.raises(RuntimeError):
        torch.nn.utils.weight_norm(t)
    with pytest.raises(RuntimeError):
        rumus.nn.utils.weight_norm(r)


def test_normal_shapes_moments_and_gradients() -> None:
    for fw in (torch, rumus):
        assert tuple(fw.normal(2.0, 3.0, (4, 5)).shape) == (4, 5)
        assert tuple(fw.normal(fw.zeros(3, 1), fw.ones(1, 2)).shape) == (3, 2)
        assert tuple(fw.normal(fw.zeros(6), 1.0).shape) == (6,)
        assert tuple(fw.normal(fw.zeros(3, 1), fw.ones(1, 3)).shape) == (3, 3)
        with pytest.raises((TypeError, RuntimeError)):
            fw.normal(0.0, 1.0)
    rumus.manual_seed(0)
    s = rumus.normal(2.0, 3.0, (200000,)).numpy()
    assert abs(s.mean() - 2.0) < 0.05 and abs(s.std() - 3.0) < 0.05
    mean = np.arange(4, dtype=np.float32)
    out = rumus.normal(rumus.from_numpy(mean), 0.0)
    np.testing.assert_array_equal(out.numpy(), mean)
    m = rumus.zeros(5, requires_grad=True)
    sd = rumus.full((5,), 2.0, requires_grad=True)
    o = rumus.normal(m, sd)
    o.sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), np.ones(5))
    np.testing.assert_allclose(sd.grad.numpy(), o.detach().numpy() / 2.0, rtol=1e-6)  # torch: (out-mean)/std


def test_small_markers_match_torch() -> None:
    from torch.nn.attention import SDPBackend as TB
    from torch.nn.attention import sdpa_kernel as tk
    from torch.optim.optimizer import required as treq
    from torch.utils.checkpoint import get_device_states as tgds

    from rumus.nn.attention import SDPBackend as RB
    from rumus.nn.attention import sdpa_kernel as rk
    from rumus.optim.optimizer import required as rreq
    from rumus.utils.checkpoint import get_device_states as rgds

    assert repr(rreq) == repr(treq)
    assert {k: int(v) for k, v in RB.__members__.items()} == {k: int(v) for k, v in TB.__members__.items()}
    with tk(TB.MATH), rk(RB.MATH):
        pass
    with rk([RB.MATH, RB.FLASH_ATTENTION]):
        pass
    with pytest.raises(TypeError), rk("math"):
        pass
    assert tgds(torch.zeros(2)) == ([], [])
    assert rgds(rumus.zeros(2)) == ([], [])


def _check_markers(fw: Any) -> None:
    class Model(fw.nn.Module):  # type: ignore[name-defined,misc]
        scale: fw.jit.Final[float] = 2.0

        @fw.jit.ignore
        def helper(self, x: Any) -> Any:
            return x * self.scale

        @fw.jit.unused
        def unused(self) -> int:
            return 1

        @fw.jit.ignore(drop=True)
        def dropped(self) -> int:
            return 3

        def forward(self, x: Any) -> Any:
            if not fw.jit.is_scripting() and not fw.jit.is_tracing():
                return self.helper(x)
            raise AssertionError("eager mode")

    m = Model()
    assert float(m(fw.ones(2)).sum()) == 4.0 and m.unused() == 1 and m.dropped() == 3
    with pytest.raises(AssertionError, match="shape"):
        fw._assert(False, "shape")
    fw._assert(fw.tensor(True), "fine")


def test_jit_markers_scalar_tensor_assert_pi_match_torch() -> None:
    _check_markers(torch)
    _check_markers(rumus)
    assert rumus.pi == torch.pi
    for v, dt in ((3, None), (2.5, "float64"), (1, "int64")):
        t = torch.scalar_tensor(v, dtype=getattr(torch, dt)) if dt else torch.scalar_tensor(v)
        r = rumus.scalar_tensor(v, dtype=getattr(rumus, dt)) if dt else rumus.scalar_tensor(v)
        assert tuple(r.shape) == tuple(t.shape) == () and str(r.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert r.item() == t.item()


def test_distribution_module_paths_and_fx_wrap() -> None:
    from rumus.distributions.categorical import Categorical
    from rumus.distributions.kl import kl_divergence
    from rumus.distributions.normal import Normal

    import importlib.util

    import rumus.distributions as rd

    assert importlib.util.find_spec("rumus.distributions.normal") is not None
    assert importlib.util.find_spec("rumus.jit") is not None and importlib.util.find_spec("rumus.fx") is not None

    assert Categorical is rd.Categorical and Normal is rd.Normal and kl_divergence is rd.kl_divergence
    logits = np.array([[0.1, -0.4, 1.2]], dtype=np.float32)
    tl = torch.distributions.categorical.Categorical(logits=torch.from_numpy(logits))
    rl = Categorical(logits=rumus.from_numpy(logits))
    act = np.array([2])
    np.testing.assert_allclose(rl.log_prob(rumus.from_numpy(act)).numpy(), tl.log_prob(torch.from_numpy(act)).numpy(),
                               rtol=1e-6)

    def leaf(x: Any) -> Any:
        return x + 1

    # torch.fx.wrap only accepts calls at a module's top level (it registers the name for tracing);
    # what it returns there is its argument, which is all eager code sees.
    assert callable(torch.fx.wrap)
    assert rumus.fx.wrap(leaf) is leaf and rumus.fx.wrap("leaf") == "leaf"

"""The PyTorch-compat ops (structural composites, norms, F.pad/interpolate/...) against torch: values, and
gradients both against torch's autograd and against central finite differences in float64."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm

torch = pytest.importorskip("torch")
Fn = Callable[[Any, Any], Any]


def _F(lib: Any) -> Any:
    return lib.nn.functional


CASES: list[tuple[str, tuple[int, ...], Fn]] = [
    ("tril", (4, 5), lambda L, x: L.tril(x, -1)), ("triu", (2, 4, 3), lambda L, x: x.triu(1)),
    ("flip", (3, 4, 2), lambda L, x: L.flip(x, (0, 2))), ("roll", (3, 4), lambda L, x: L.roll(x, (1, -3), (0, 1))),
    ("roll-flat", (3, 4), lambda L, x: L.roll(x, 5)), ("repeat", (2, 3), lambda L, x: x.repeat(2, 1, 3)),
    ("repeat_interleave", (3, 2), lambda L, x: L.repeat_interleave(x, 2, dim=0)),
    ("repeat_interleave-t", (3, 2), lambda L, x: x.repeat_interleave(L.tensor([1, 0, 3]), dim=0)),
    ("cumsum", (3, 7), lambda L, x: L.cumsum(x, 1)), ("cumsum-0", (5, 2), lambda L, x: x.cumsum(0)),
    ("cumprod", (2, 6), lambda L, x: L.cumprod(x, -1)),
    ("norm", (3, 4), lambda L, x: x.norm()), ("norm-dim", (3, 4), lambda L, x: x.norm(dim=1)),
    ("norm-1", (3, 4), lambda L, x: L.norm(x, p=1, dim=0, keepdim=True)),
    ("norm-inf", (3, 4), lambda L, x: x.norm(p=float("inf"), dim=1)), ("norm-3", (3, 4), lambda L, x: x.norm(p=3)),
    ("einsum-mm", (3, 4), lambda L, x: L.einsum("ij,jk->ik", x, x.t())),
    ("einsum-bmm", (2, 3, 4), lambda L, x: L.einsum("bij,bkj->bik", x, x)),
    ("einsum-outer", (3, 4), lambda L, x: L.einsum("i,j->ij", x[0], x[1])),
    ("einsum-trace", (3, 3), lambda L, x: L.einsum("ii", x)), ("einsum-sum", (3, 4), lambda L, x: L.einsum("ij->", x)),
    ("einsum-3", (2, 3), lambda L, x: L.einsum("ab,ab,ab->a", x, x, x)),
    ("einsum-implicit", (3, 4), lambda L, x: L.einsum("ij,kj", x, x)),
    ("meshgrid-ij", (3, 4), lambda L, x: L.meshgrid(x[0], x[1, :2], indexing="ij")[1] * 1.0),
    ("meshgrid-xy", (3, 4), lambda L, x: L.meshgrid(x[0], x[1, :2], indexing="xy")[0] * 1.0),
    ("scatter", (3, 5), lambda L, x: x.scatter(1, L.tensor([[0, 3], [1, 4], [2, 0]]), x[:, :2] * 2.0)),
    ("masked_fill", (3, 4), lambda L, x: x.masked_fill(x > 0, -1.0)),
    ("pad-constant", (2, 3, 4), lambda L, x: _F(L).pad(x, (1, 2, 0, 1), value=0.5)),
    ("pad-crop", (2, 3, 4), lambda L, x: _F(L).pad(x, (-1, 2))),
    ("pad-reflect", (1, 2, 4, 5), lambda L, x: _F(L).pad(x, (2, 1, 3, 0), mode="reflect")),
    ("pad-replicate", (1, 2, 3, 4), lambda L, x: _F(L).pad(x, (2, 3, 1, 1), mode="replicate")),
    ("pad-circular", (1, 2, 5), lambda L, x: _F(L).pad(x, (2, 1), mode="circular")),
    ("interp-nearest", (1, 2, 3, 4), lambda L, x: _F(L).interpolate(x, scale_factor=2)),
    ("interp-nearest-size", (1, 2, 5, 3), lambda L, x: _F(L).interpolate(x, size=(3, 7))),
    ("interp-bilinear", (1, 2, 3, 4), lambda L, x: _F(L).interpolate(x, size=(5, 7), mode="bilinear")),
    ("interp-bilinear-ac", (2, 1, 3, 4), lambda L, x: _F(L).interpolate(x, scale_factor=2, mode="bilinear",
                                                                        align_corners=True)),
    ("interp-linear", (2, 3, 5), lambda L, x: _F(L).interpolate(x, scale_factor=1.5, mode="linear")),
    ("normalize", (3, 4), lambda L, x: _F(L).normalize(x, dim=1)),
    ("normalize-p1", (3, 4), lambda L, x: _F(L).normalize(x, p=1, dim=0)),
    ("cosine_similarity", (3, 4), lambda L, x: _F(L).cosine_similarity(x, x.flip(0) + 0.5, dim=1)),
    ("kl_div", (3, 4), lambda L, x: _F(L).kl_div(x.log_softmax(-1), x.flip(1).softmax(-1), reduction="batchmean")),
    ("kl_div-log", (3, 4), lambda L, x: _F(L).kl_div(x, (x * 0.5).log_softmax(-1), reduction="sum", log_target=True)),
    ("dropout2d-eval", (2, 3, 2, 2), lambda L, x: _F(L).dropout2d(x, 0.5, training=False)),
    ("sort", (3, 5), lambda L, x: L.sort(x, dim=1).values), ("sort-desc", (4, 3), lambda L, x: x.sort(0, True)[0]),
    ("topk", (3, 6), lambda L, x: L.topk(x, 3).values), ("topk-min", (5, 4), lambda L, x: x.topk(2, 0, False)[0]),
    ("kthvalue", (3, 5), lambda L, x: L.kthvalue(x, 2, 1).values), ("msort", (4, 2), lambda L, x: L.msort(x)),
]


def _input(shape: tuple[int, ...], name: str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    return x if not name.startswith(("cumprod", "norm-")) else np.abs(x) + 0.1


@pytest.mark.parametrize(("name", "shape", "fn"), CASES, ids=[c[0] for c in CASES])
def test_matches_torch_values_and_gradients(name: str, shape: tuple[int, ...], fn: Fn) -> None:
    x = _input(shape, name)
    tx = torch.tensor(x, requires_grad=True)
    rx = rm.tensor(x, dtype=rm.float64, requires_grad=True)
    ty, ry = fn(torch, tx), fn(rm, rx)
    assert tuple(ry.shape) == tuple(ty.shape)
    np.testing.assert_allclose(ry.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(0).standard_normal(ty.shape)
    (ty * torch.from_numpy(w)).sum().backward()
    (ry * rm.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    # central differences on the rumus function itself
    flat = x.reshape(-1)
    num = np.zeros_like(flat)
    for i in range(flat.size):
        for sign in (1, -1):
            xp = flat.copy()
            xp[i] += sign * 1e-6
            num[i] += sign * float((fn(rm, rm.tensor(xp.reshape(shape), dtype=rm.float64)).numpy() * w).sum())
    np.testing.assert_allclose(rx.grad.numpy().reshape(-1), num / 2e-6, rtol=1e-5, atol=1e-6)


INT_CASES: list[tuple[str, Fn]] = [
    ("bool-sum", lambda L, x: (x > 2).sum()), ("int-sum-dim", lambda L, x: x.sum(0)),
    ("where-ints", lambda L, x: L.where(x > 2, 1, 0)), ("where-bools", lambda L, x: L.where(x > 2, True, False)),
    ("where-mixed", lambda L, x: L.where(x > 2, 1.0, 0)), ("cumsum-bool", lambda L, x: (x > 2).cumsum(1)),
    ("cumsum-int", lambda L, x: L.cumsum(x, 0)), ("tril-int", lambda L, x: x.tril()),
    ("flip-int", lambda L, x: x.flip(1)),
    ("new_zeros", lambda L, x: x.new_zeros(2, 3)), ("new_ones", lambda L, x: x.new_ones((2,))),
    ("new_full", lambda L, x: x.new_full((2, 2), 7)), ("new_tensor", lambda L, x: x.new_tensor([1, 2])),
    ("as_tensor", lambda L, x: L.as_tensor([1.5, 2.0]) * 2), ("one-arg-where", lambda L, x: L.where(x > 3)[1]),
    ("nonzero", lambda L, x: (x > 2).nonzero()),
]


@pytest.mark.parametrize(("name", "fn"), INT_CASES, ids=[c[0] for c in INT_CASES])
def test_dtype_rules_match_torch(name: str, fn: Fn) -> None:
    data = [[1, 2, 3, 4], [5, 0, 2, 6]]
    t, r = fn(torch, torch.tensor(data)), fn(rm, rm.tensor(data))
    assert str(r.dtype).replace("rumus.", "") == str(t.dtype).replace("torch.", ""), (r.dtype, t.dtype)
    assert r.tolist() == t.tolist()


def test_small_api_items() -> None:
    assert rm.float is rm.float32 and rm.double is rm.float64 and rm.long is rm.int64 and rm.half is rm.float16
    assert rm.int is rm.int32 and rm.bool.name == "bool"
    assert rm.cuda.is_available() is False and rm.cuda.device_count() == 0
    assert rm.backends.mps.is_available() is False
    assert str(rm.device("cpu")) == "cpu"
    assert f"{rm.tensor(0.123456):.3f}" == "0.123" and f"{rm.tensor([2.5]):>6.2f}" == "  2.50"
    assert rm.equal(rm.tensor([1, 2]), rm.tensor([1, 2])) and not rm.equal(rm.tensor([1, 2]), rm.tensor([1, 3]))
    assert not rm.equal(rm.ones(2), rm.ones(1, 2))
    t = rm.ones(3)
    assert rm.as_tensor(t) is t
    with pytest.raises(rm.BackendUnavailable, match="CUDA"):
        rm.cuda.get_device_name()


def test_in_place_index_forms() -> None:
    x = rm.zeros(3, 4)
    x.masked_fill_(rm.tensor([[True, False, False, True]] * 3), 2.0)
    x.index_add_(0, rm.tensor([0, 0, 2]), rm.ones(3, 4))
    x.scatter_(1, rm.tensor([[1], [2], [3]]), rm.full((3, 1), 9.0))
    want = torch.zeros(3, 4)
    want.masked_fill_(torch.tensor([[True, False, False, True]] * 3), 2.0)
    want.index_add_(0, torch.tensor([0, 0, 2]), torch.ones(3, 4))
    want.scatter_(1, torch.tensor([[1], [2], [3]]), torch.full((3, 1), 9.0))
    np.testing.assert_array_equal(x.numpy(), want.numpy())
    leaf = rm.zeros(2, requires_grad=True)
    with pytest.raises(rm.AutogradError, match="no_grad"):
        leaf.masked_fill_(rm.tensor([True, False]), 1.0)


def test_multinomial_follows_the_weights_and_rules() -> None:
    rm.manual_seed(0)
    probs = rm.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    draws = rm.multinomial(probs, 2000, replacement=True)
    assert draws.dtype == rm.int64 and draws.shape == (2, 2000)
    counts = np.bincount(draws.numpy()[0], minlength=3)
    assert counts[0] == 0 and abs(counts[2] / 2000 - 0.75) < 0.04
    assert set(draws.numpy()[1].tolist()) == {0}
    no_rep = rm.multinomial(rm.tensor([1.0, 1.0, 1.0, 1.0]), 4)
    assert sorted(no_rep.tolist()) == [0, 1, 2, 3]
    with pytest.raises(rm.RumusError, match="without replacement"):
        rm.multinomial(rm.tensor([1.0, 0.0]), 2)
    with pytest.raises(rm.RumusError, match="non-negative"):
        rm.multinomial(rm.tensor([1.0, -1.0]), 1)


def test_module_hooks_and_load_state_dict_result() -> None:
    m = rm.nn.Linear(2, 2)
    seen: list[tuple[int, ...]] = []
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    post = m.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    x = rm.ones(3, 2)
    np.testing.assert_allclose(m(x).numpy(), m.forward(x * 2).numpy())
    assert seen == [(3, 2)]
    pre.remove()
    post.remove()
    np.testing.assert_allclose(m(x).numpy(), m.forward(x).numpy())
    assert seen == [(3, 2)]
    sd = dict(m.state_dict())
    sd["extra"] = rm.ones(1)
    del sd["bias"]
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]
    missing, unexpected = res
    assert missing == ["bias"]


def test_utils_data_module_path() -> None:
    from rumus.utils.data import DataLoader, TensorDataset
    dl = DataLoader(TensorDataset(rm.arange(6).float()), batch_size=4)
    assert [b[0].shape for b in dl] == [(4,), (2,)]


def test_sort_indices_match_torch_stable_sort_with_ties() -> None:
    data = [[3, 1, 2, 1, 3, 0], [5, 5, -1, 5, 0, 0]]
    for dtype in ("float32", "int64", "int32"):
        for desc in (False, True):
            r = rm.tensor(data, dtype=dtype).sort(dim=1, descending=desc, stable=True)
            t = torch.tensor(data, dtype=getattr(torch, dtype)).sort(dim=1, descending=desc, stable=True)
            assert r.indices.tolist() == t.indices.tolist() and r.values.tolist() == t.values.tolist()
            assert r.indices.dtype == rm.int64
    nan = [2.0, float("nan"), -1.0]
    assert rm.tensor(nan).argsort().tolist() == torch.tensor(nan).argsort(stable=True).tolist()
    assert rm.tensor(nan).argsort(descending=True).tolist() == torch.tensor(nan).argsort(descending=True,
                                                                                          stable=True).tolist()
    assert rm.tensor([True, False, True]).argsort().tolist() == [1, 0, 2]
    with pytest.raises(rm.RumusError, match="topk"):
        rm.topk(rm.ones(3), 4)

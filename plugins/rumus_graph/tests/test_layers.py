"""GCNConv, SAGEConv and GATConv: PyG's parameter names, outputs and gradients against dense torch
re-implementations of PyG's formulas with the same weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
import rumus_graph as rg

torch = pytest.importorskip("torch")


def _graph(seed: int = 0, n: int = 12, e: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ei = np.stack([rng.integers(0, n, e), rng.integers(0, n, e)])
    ei[:, 0] = [3, 3]  # one self loop already present
    x = rng.normal(0, 1, (n, 5)).astype(np.float32)
    return ei, x


def _dense_adj(ei: np.ndarray, n: int) -> Any:
    a = torch.zeros(n, n, dtype=torch.float64)
    a.index_put_((torch.tensor(ei[1]), torch.tensor(ei[0])), torch.ones(ei.shape[1], dtype=torch.float64),
                 accumulate=True)
    return a  # a[target, source] = number of edges source -> target


def _t(p: rm.Tensor) -> Any:
    return torch.tensor(p.detach().numpy().astype(np.float64), requires_grad=True)


def _check_grads(out: rm.Tensor, want: Any, params: dict[str, rm.Tensor], tparams: dict[str, Any]) -> None:
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = np.random.default_rng(9).normal(0, 1, tuple(out.shape))
    out.backward(rm.tensor(g, dtype=rm.float32, device=out.device))
    want.backward(torch.tensor(g))
    for name, p in params.items():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_gcnconv_matches_pyg_formula(device: str) -> None:
    ei, x = _graph()
    n = x.shape[0]
    conv = rg.GCNConv(5, 4).to(device)
    assert sorted(dict(conv.named_parameters())) == ["bias", "lin.weight"]
    rm.nn.init.uniform_(conv.bias, -1, 1)
    params = dict(conv.named_parameters())
    tp = {k: _t(v) for k, v in params.items()}
    a = _dense_adj(ei, n)
    diag = torch.diagonal(a)
    diag[diag == 0] = 1.0  # add_remaining_self_loops: nodes without a self loop get one
    dinv = a.sum(1).pow(-0.5)
    norm = dinv[:, None] * a * dinv[None, :]
    want = norm @ (torch.tensor(x, dtype=torch.float64) @ tp["lin.weight"].T) + tp["bias"]
    _check_grads(conv(rm.tensor(x, device=device), ei), want, params, tp)


@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
def test_sageconv_matches_pyg_formula(device: str, aggr: str) -> None:
    ei, x = _graph(1)
    n = x.shape[0]
    conv = rg.SAGEConv(5, 3, aggr=aggr).to(device)
    assert sorted(dict(conv.named_parameters())) == ["lin_l.bias", "lin_l.weight", "lin_r.weight"]
    params = dict(conv.named_parameters())
    tp = {k: _t(v) for k, v in params.items()}
    xt = torch.tensor(x, dtype=torch.float64)
    a = _dense_adj(ei, n)
    if aggr == "max":
        src, dst = torch.tensor(ei[0]), torch.tensor(ei[1])
        agg = torch.zeros(n, 5, dtype=torch.float64).scatter_reduce(0, dst[:, None].expand(-1, 5), xt[src], "amax",
                                                                    include_self=False)
    else:
        agg = a @ xt
        if aggr == "mean":
            agg = agg / a.sum(1, keepdim=True).clamp(min=1)
    want = agg @ tp["lin_l.weight"].T + tp["lin_l.bias"] + xt @ tp["lin_r.weight"].T
    _check_grads(conv(rm.tensor(x, device=device), ei), want, params, tp)


@pytest.mark.parametrize("concat", [True, False])
def test_gatconv_matches_pyg_formula(device: str, concat: bool) -> None:
    ei, x = _graph(2)
    ei = np.unique(ei, axis=1)  # PyG's GAT softmax is over distinct edges; keep the dense reference exact
    n, heads, c = x.shape[0], 3, 2
    conv = rg.GATConv(5, c, heads=heads, concat=concat).to(device)
    assert sorted(dict(conv.named_parameters())) == ["att_dst", "att_src", "bias", "lin.weight"]
    assert tuple(conv.att_src.shape) == (1, heads, c)
    rm.nn.init.uniform_(conv.bias, -1, 1)
    params = dict(conv.named_parameters())
    tp = {k: _t(v) for k, v in params.items()}
    xt = torch.tensor(x, dtype=torch.float64)
    mask = _dense_adj(ei, n) > 0
    mask.fill_diagonal_(True)  # remove_self_loops + add_self_loops
    h = (xt @ tp["lin.weight"].T).view(n, heads, c)
    a_src = (h * tp["att_src"]).sum(-1)
    a_dst = (h * tp["att_dst"]).sum(-1)
    logits = torch.nn.functional.leaky_relu(a_dst.T[:, :, None] + a_src.T[:, None, :], 0.2)  # (heads, tgt, src)
    alpha = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
    out = torch.einsum("hts,shc->thc", alpha, h)
    want = (out.reshape(n, heads * c) if concat else out.mean(1)) + tp["bias"]
    _check_grads(conv(rm.tensor(x, device=device), ei), want, params, tp)


def test_layers_accept_a_sparse_tensor_and_cache_its_normalisation() -> None:
    ei, x = _graph(3)
    a = rg.SparseTensor.from_edge_index(ei, num_nodes=x.shape[0])
    conv = rg.GCNConv(5, 2)
    xt = rm.tensor(x)
    first = conv(xt, a).numpy()
    cached = conv._cache._value
    np.testing.assert_array_equal(conv(xt, a).numpy(), first)
    assert conv._cache._value is cached
    np.testing.assert_allclose(conv(xt, ei).numpy(), first, rtol=1e-6, atol=1e-6)


def test_a_pyg_state_dict_loads_by_name() -> None:
    """State-dict keys are PyG's, so a dict of PyG-named tensors loads straight in."""
    conv = rg.GATConv(5, 2, heads=2)
    rng = np.random.default_rng(0)
    sd = {"lin.weight": rng.normal(size=(4, 5)), "att_src": rng.normal(size=(1, 2, 2)),
          "att_dst": rng.normal(size=(1, 2, 2)), "bias": rng.normal(size=4)}
    conv.load_state_dict({k: rm.tensor(v, dtype=rm.float32) for k, v in sd.items()})
    for k, v in sd.items():
        np.testing.assert_allclose(conv.state_dict()[k].numpy(), v, rtol=1e-6)

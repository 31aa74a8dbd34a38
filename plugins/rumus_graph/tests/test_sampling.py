"""Neighbour sampling: fan-outs respected, edges real, seeded, and mini-batch training with it works."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
import rumus_graph as rg
from rumus_contracts import IndexOutOfRange, RumusError


def _sbm(n: int = 2000) -> rg.SBMGraph:
    return rg.stochastic_block_model(n_nodes=n, n_blocks=5, seed=1)


def test_fanouts_edges_and_relabelling() -> None:
    g = _sbm()
    a = rg.SparseTensor.from_edge_index(g.edge_index, num_nodes=2000)
    sampler = rg.NeighborSampler(a, fanouts=[5, 3], seed=0)
    seeds = np.array([7, 42, 1999, 3])
    sub = sampler.sample(seeds)
    assert sub.batch_size == 4
    np.testing.assert_array_equal(sub.n_id[:4], seeds)
    assert np.unique(sub.n_id).size == sub.n_id.size
    full = {(int(t), int(s)) for s, t in g.edge_index.T}
    row, col = sub.adj.coo()
    glob = {(int(sub.n_id[t]), int(sub.n_id[s])) for t, s in zip(row, col)}
    assert glob <= full  # every sampled edge exists (target, source)
    deg = np.bincount(row, minlength=sub.n_id.size)
    indeg = a.degree(1)
    np.testing.assert_array_equal(deg[:4], np.minimum(indeg[seeds], 5))  # layer 1: min(fanout, degree) per seed
    first_hop = np.unique(col[np.isin(row, np.arange(4))])
    hop1_new = first_hop[first_hop >= 4]
    np.testing.assert_array_equal(deg[hop1_new], np.minimum(indeg[sub.n_id[hop1_new]], 3))
    # the subgraph's edges are exactly those listed in e_id, in the full graph's storage
    r_full, c_full = a.coo()
    assert {(int(r_full[e]), int(c_full[e])) for e in sub.e_id} == glob


def test_same_seed_same_samples_and_all_neighbours_with_minus_one() -> None:
    a = rg.SparseTensor.from_edge_index(_sbm().edge_index, num_nodes=2000)
    s1 = rg.NeighborSampler(a, [4, 4], seed=3).sample([1, 2, 3])
    s2 = rg.NeighborSampler(a, [4, 4], seed=3).sample([1, 2, 3])
    np.testing.assert_array_equal(s1.n_id, s2.n_id)
    np.testing.assert_array_equal(s1.e_id, s2.e_id)
    s3 = rg.NeighborSampler(a, [4, 4], seed=4).sample([1, 2, 3])
    assert not np.array_equal(s1.e_id, s3.e_id)
    everything = rg.NeighborSampler(a, [-1], seed=0).sample([10])
    assert everything.adj.nnz == a.degree(1)[10]


def test_bad_arguments_raise() -> None:
    a = rg.SparseTensor.from_edge_index(_sbm(100).edge_index, num_nodes=100)
    with pytest.raises(IndexOutOfRange, match="seeds"):
        rg.NeighborSampler(a, [2]).sample([5, 100])
    with pytest.raises(RumusError, match="fanouts"):
        rg.NeighborSampler(a, [0])
    with pytest.raises(RumusError, match="distinct"):
        rg.NeighborSampler(a, [2]).sample([1, 1])


def test_minibatch_sage_training_learns(device: str) -> None:
    g = _sbm(3000)
    a = rg.SparseTensor.from_edge_index(g.edge_index, num_nodes=3000)
    rm.manual_seed(0)
    conv1, conv2 = rg.SAGEConv(16, 16).to(device), rg.SAGEConv(16, 5).to(device)
    opt = rm.optim.Adam([*conv1.parameters(), *conv2.parameters()], lr=0.05)
    sampler = rg.NeighborSampler(a, fanouts=[10, 5], seed=0, device=device)
    x_all = rm.tensor(g.x, device=device)
    train = np.arange(1000)
    for sub in [s for _ in range(4) for s in sampler.batches(train, batch_size=250)]:  # 4 epochs, 16 steps
        idx = rm.tensor(sub.n_id.astype(np.int32), dtype=rm.int32, device=device)
        out = conv2(rm.relu(conv1(rm.index_select(x_all, 0, idx), sub.adj)), sub.adj)
        target = rm.tensor(g.y[sub.n_id[:sub.batch_size]], device=device)
        loss = rm.nn.functional.cross_entropy(out[:sub.batch_size], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with rm.no_grad():
        full = rg.SparseTensor.from_edge_index(g.edge_index, num_nodes=3000, device=device)
        pred = conv2(rm.relu(conv1(x_all, full)), full).numpy().argmax(1)
    accuracy = float((pred == g.y)[1000:].mean())
    assert accuracy > 0.85, accuracy

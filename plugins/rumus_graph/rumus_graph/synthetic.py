"""Synthetic graphs for tests, examples and benchmarks (numpy, seeded)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SBMGraph(NamedTuple):
    edge_index: np.ndarray  # (2, E) int64, undirected (both directions), no self loops or duplicates
    x: np.ndarray           # (n, n_blocks + extra) float32: noisy community one-hots plus noise columns
    y: np.ndarray           # (n,) int64 community of each node


def stochastic_block_model(n_nodes: int = 10_000, n_blocks: int = 5, deg_in: float = 8.0, deg_out: float = 2.0,
                           noise: float = 1.0, extra_features: int = 11, seed: int = 0) -> SBMGraph:
    """A planted-partition graph: each node has ~deg_in neighbours in its own community and ~deg_out in
    others. Features are the community's one-hot plus N(0, noise^2) on every column, so a node alone
    is classified poorly and aggregating over neighbours helps (what a GCN must learn)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_blocks, n_nodes)
    by_block = np.argsort(y, kind="stable")  # node ids grouped by community
    count = np.bincount(y, minlength=n_blocks)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])

    def member_of(blocks: np.ndarray) -> np.ndarray:  # a uniform random node of each given community
        return np.asarray(by_block[start[blocks] + (rng.random(blocks.size) * count[blocks]).astype(np.int64)])

    n_in, n_out = int(n_nodes * deg_in / 2), int(n_nodes * deg_out / 2)
    u = rng.integers(0, n_nodes, n_in)
    v = member_of(y[u])
    u2 = rng.integers(0, n_nodes, n_out)
    v2 = member_of((y[u2] + rng.integers(1, n_blocks, n_out)) % n_blocks)
    src, dst = np.concatenate([u, u2]), np.concatenate([v, v2])
    keep = src != dst
    a, b = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    key = np.unique(a * n_nodes + b)  # both directions, duplicates dropped, sorted by source
    pairs = np.stack([key // n_nodes, key % n_nodes])
    x = np.concatenate([np.eye(n_blocks)[y], np.zeros((n_nodes, extra_features))], axis=1)
    x += rng.normal(0.0, noise, x.shape)
    return SBMGraph(pairs.astype(np.int64), x.astype(np.float32), y.astype(np.int64))

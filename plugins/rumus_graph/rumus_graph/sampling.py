"""Neighbour sampling for mini-batches (GraphSAGE / PyG NeighborLoader style), seeded and host-side.

From a batch of seed nodes, layer by layer, each frontier node keeps at most `fanouts[l]` of its
incoming edges (all of them for -1), chosen uniformly without replacement; newly reached nodes form
the next frontier. The result is the sampled subgraph over the reached nodes, relabelled so that
the seeds come first (`x[n_id]` gives its features; predictions for the seeds are `out[:batch_size]`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .sparse import SparseTensor, host_indices
from .structure import check_indices


@dataclass
class SampledSubgraph:
    n_id: np.ndarray        # global ids of the subgraph's nodes; the first batch_size are the seeds
    adj: SparseTensor       # (len(n_id), len(n_id)) over local ids, graph convention (row = target)
    batch_size: int
    e_id: np.ndarray        # position of each sampled edge in the full graph's storage order


class NeighborSampler:
    """`sampler.sample(seeds)` -> SampledSubgraph; `sampler.batches(nodes, batch_size)` iterates over them.

    graph   -- SparseTensor in graph convention (row i holds the edges arriving at node i).
    fanouts -- neighbours kept per node, one entry per layer (-1: all).
    seed    -- seeds the generator: the same seed and calls give the same subgraphs.
    """

    def __init__(self, graph: SparseTensor, fanouts: Sequence[int], seed: int = 0, device: Any = None) -> None:
        if graph.shape[0] != graph.shape[1]:
            raise ShapeError(f"NeighborSampler needs a square adjacency, got {graph.shape}")
        if not fanouts or any(isinstance(f, bool) or not isinstance(f, int) or (f < 1 and f != -1) for f in fanouts):
            raise RumusError(f"fanouts must be a non-empty list of ints >= 1 (or -1 for all), got {list(fanouts)}")
        self.graph, self.fanouts = graph, [int(f) for f in fanouts]
        self.rowptr = graph.host.rowptr.astype(np.int64)
        self.col = graph.host.col.astype(np.int64)
        self.row = np.repeat(np.arange(graph.shape[0]), np.diff(self.rowptr))  # target of each stored edge
        self.values = graph.values.detach().numpy()
        self.rng = np.random.default_rng(seed)
        self.device = device if device is not None else graph.device

    def _pick(self, frontier: np.ndarray, fanout: int) -> np.ndarray:
        """Edge positions kept for the frontier nodes: per node, a uniform subset of size min(fanout, degree)."""
        lo, hi = self.rowptr[frontier], self.rowptr[frontier + 1]
        deg = hi - lo
        total = int(deg.sum())
        if total == 0:
            return np.zeros(0, np.int64)
        owner = np.repeat(np.arange(frontier.size), deg)
        start = np.repeat(lo - np.concatenate([[0], np.cumsum(deg)[:-1]]), deg)
        edges: np.ndarray = np.arange(total) + start  # every incoming edge of every frontier node
        if fanout == -1:
            return edges
        keys = self.rng.random(total)  # a random rank within each node's edges: keep the `fanout` smallest
        order = np.lexsort((keys, owner))
        first = np.concatenate([[0], np.cumsum(deg)[:-1]])
        rank = np.empty(total, np.int64)
        rank[order] = np.arange(total) - np.repeat(first, deg)
        kept: np.ndarray = np.sort(edges[rank < fanout])
        return kept

    def sample(self, seeds: Any) -> SampledSubgraph:
        n = self.graph.shape[0]
        seeds = check_indices("seeds", host_indices("seeds", seeds), n)
        if np.unique(seeds).size != seeds.size:
            raise RumusError("NeighborSampler.sample: seeds must be distinct nodes")
        local = np.full(n, -1, np.int64)
        local[seeds] = np.arange(seeds.size)
        nodes, frontier, kept = [seeds], seeds, []
        for fanout in self.fanouts:
            e = self._pick(frontier, fanout)
            kept.append(e)
            src = self.col[e]
            new = np.unique(src[local[src] < 0])
            local[new] = sum(x.size for x in nodes) + np.arange(new.size)
            nodes.append(new)
            frontier = new
        n_id = np.concatenate(nodes)
        e_id = np.unique(np.concatenate(kept)) if kept else np.zeros(0, np.int64)
        adj = SparseTensor.from_coo(local[self.row[e_id]], local[self.col[e_id]], self.values[e_id],
                                    (n_id.size, n_id.size), self.graph.values.dtype, self.device)
        return SampledSubgraph(n_id, adj, int(seeds.size), e_id)

    def batches(self, nodes: Any, batch_size: int, shuffle: bool = True) -> Iterator[SampledSubgraph]:
        ids = host_indices("nodes", nodes)
        if shuffle:
            ids = self.rng.permutation(ids)
        for i in range(0, ids.size, batch_size):
            yield self.sample(ids[i:i + batch_size])

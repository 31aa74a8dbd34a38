"""A small model trained single-process and tensor-parallel (Megatron layout): vocab-parallel
embedding -> column-parallel linear (no gather) -> tanh -> row-parallel linear -> column-parallel
linear (gathered). Each rank's shards start as slices of the same full layers, so after K steps
the gathered shards must equal the single-process weights."""

from __future__ import annotations

from typing import Any

import numpy as np
from sgd_reference import train_mse_sgd

import rumus as rm
from rumus import nn
from rumus.distributed import Communicator, all_gather
from rumus.distributed.tensor_parallel import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding

STEPS, BATCH, SEQ, VOCAB, D, HIDDEN, OUT = 5, 3, 4, 8, 6, 8, 4


class Full(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(7)
        self.emb = nn.Embedding(VOCAB, D)
        self.up = nn.Linear(D, HIDDEN)
        self.down = nn.Linear(HIDDEN, D)
        self.head = nn.Linear(D, OUT)
        with rm.no_grad():
            for p in self.parameters():
                p.copy_(rm.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))

    def forward(self, ids: Any) -> Any:
        return self.head(self.down(rm.tanh(self.up(self.emb(ids)))))


class Parallel(nn.Module):
    def __init__(self, full: Full, comm: Communicator) -> None:
        super().__init__()
        self.emb = VocabParallelEmbedding.from_full(full.emb, comm)
        self.up = ColumnParallelLinear.from_full(full.up, comm, gather_output=False)
        self.down = RowParallelLinear.from_full(full.down, comm)
        self.head = ColumnParallelLinear.from_full(full.head, comm, gather_output=True)

    def forward(self, ids: Any) -> Any:
        return self.head(self.down(rm.tanh(self.up(self.emb(ids)))))


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(99)
    return (rng.integers(0, VOCAB, (STEPS, BATCH, SEQ)),
            rng.normal(size=(STEPS, BATCH, SEQ, OUT)).astype(np.float32))


def _train(model: nn.Module) -> None:
    train_mse_sgd(model, *data(), lr=0.2)


def train_single() -> dict[str, np.ndarray]:
    model = Full()
    _train(model)
    return {n: p.detach().numpy() for n, p in model.named_parameters()}


def train_tp(comm: Communicator) -> dict[str, np.ndarray]:
    """Returns the full weights, reassembled from every rank's trained shards."""
    model = Parallel(Full(), comm)
    _train(model)
    split_dim = {"emb.weight": 0, "up.weight": 0, "up.bias": 0, "down.weight": 1, "head.weight": 0,
                 "head.bias": 0}
    out = {}
    for n, p in model.named_parameters():
        if n in split_dim:
            parts = all_gather(p.detach(), comm).numpy()
            out[n] = np.concatenate(list(parts), axis=split_dim[n])
        else:  # replicated (the row-parallel bias)
            out[n] = p.detach().numpy()
    return out

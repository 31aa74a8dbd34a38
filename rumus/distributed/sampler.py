"""DistributedSampler: each rank's share of a dataset's indices (PyTorch's layout)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from rumus_contracts.communicator import CommunicatorError

from ..data.dataset import Subset


class DistributedSampler:
    """Indices `rank, rank + world_size, ...` of the (shuffled with `seed + epoch`) index list.

    Without `drop_last` the list is padded by repeating its start so every rank gets the same number
    of samples (ranks must run the same number of steps, or the collectives would pair up wrongly);
    with it, the tail that does not divide evenly is dropped. Call `set_epoch(e)` before each epoch
    so the shuffle differs per epoch but agrees across ranks. `DataLoader(sampler.shard(dataset))`
    loads this rank's share."""

    def __init__(self, dataset: Any, num_replicas: int, rank: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise CommunicatorError(f"DistributedSampler: rank {rank} must be in [0, num_replicas={num_replicas})")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        self.num_samples = n // num_replicas if drop_last else math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def indices(self) -> list[int]:
        n = len(self.dataset)
        order = (np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle
                 else np.arange(n))
        idx = [int(i) for i in order]
        if self.drop_last:
            idx = idx[:self.total_size]
        elif idx:
            while len(idx) < self.total_size:
                idx += idx[:self.total_size - len(idx)]
        return idx[self.rank:self.total_size:self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices())

    def __len__(self) -> int:
        return self.num_samples

    def shard(self, dataset: Any = None) -> Subset:
        """This rank's samples (for this epoch) as a dataset, in sampler order."""
        return Subset(self.dataset if dataset is None else dataset, self.indices())

"""IterableDataset: a stream of samples (torch.utils.data.IterableDataset), for data read in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .dataset import to_numpy_tree


class IterableDataset:
    """Subclass it and define `__iter__` yielding samples; the DataLoader batches them in order
    (`batch_size` at a time, the last batch shorter unless drop_last). Defining `__len__` gives the
    loader a length."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def __add__(self, other: IterableDataset) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several IterableDatasets one after the other."""

    def __init__(self, datasets: list[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def as_numpy(sample: Any) -> Any:
    """A sample as the default collate stacks it (tensors become numpy arrays)."""
    return to_numpy_tree(sample)


__all__ = ["ChainDataset", "IterableDataset"]

"""Map-style datasets (PyTorch-shaped): Dataset, TensorDataset, Subset, ConcatDataset, random_split.

Besides `ds[i]` (rumus Tensors), a dataset offers `ds.get_numpy(i)`: the same sample with numpy
arrays in place of tensors. DataLoader workers use it so that batches are built on the host with
numpy and become tensors once, in the main process (no backend work or tensor pickling in workers).
A dataset may also offer `get_numpy_batch(indices)`, the already collated numpy batch (equal to
`numpy_collate([get_numpy(i) for i in indices])`), when it can gather a batch faster at once.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ..random import Generator, default_generator
from ..tensor import Tensor
from .collate import numpy_collate


def to_numpy_tree(sample: Any) -> Any:
    """The sample with every Tensor replaced by its host array (tuples, lists and dicts recursed)."""
    if isinstance(sample, Tensor):
        return sample.numpy()
    if isinstance(sample, tuple):
        items = [to_numpy_tree(x) for x in sample]
        return type(sample)(*items) if hasattr(sample, "_fields") else tuple(items)
    if isinstance(sample, list):
        return [to_numpy_tree(x) for x in sample]
    if isinstance(sample, Mapping):
        return {k: to_numpy_tree(v) for k, v in sample.items()}
    return sample


class Dataset:
    """Subclass and define `__getitem__` and `__len__`; override `get_numpy` for a faster host path."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def get_numpy(self, index: int) -> Any:
        return to_numpy_tree(self[index])

    def prepare_numpy(self) -> None:
        """Called in the main process before worker processes start (host caches are built here)."""

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]


class TensorDataset(Dataset):
    """Sample i is `tuple(t[i] for t in tensors)`; every tensor has the same first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise RumusError("TensorDataset needs at least one tensor")
        for k, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise RumusError(f"TensorDataset: argument {k} is a {type(t).__name__}, not a rumus Tensor "
                                 f"(wrap numpy arrays with rumus.from_numpy)")
            if t.ndim == 0 or t.shape[0] != tensors[0].shape[0]:
                raise RumusError(f"TensorDataset: every tensor needs the same first dimension; shapes "
                                 f"{[x.shape for x in tensors]}")
        self.tensors = tuple(tensors)
        self._host: tuple[np.ndarray, ...] | None = None
        self._host_key: tuple[tuple[int, int], ...] = ()

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def _arrays(self) -> tuple[np.ndarray, ...]:
        # a host snapshot of the tensors, refreshed when an in-place op bumped a storage version
        key = tuple((id(t._storage), t._storage.version) for t in self.tensors)
        if self._host is None or key != self._host_key:
            self._host, self._host_key = tuple(t.numpy() for t in self.tensors), key
        return self._host

    def get_numpy(self, index: int) -> tuple[np.ndarray, ...]:
        return tuple(a[index] for a in self._arrays())

    def get_numpy_batch(self, indices: Sequence[int]) -> tuple[np.ndarray, ...]:
        idx = np.asarray(indices, dtype=np.int64)
        return tuple(a[idx] for a in self._arrays())

    def prepare_numpy(self) -> None:
        self._arrays()


class Subset(Dataset):
    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.indices[index])]

    def get_numpy(self, index: int) -> Any:
        return _get_numpy(self.dataset, int(self.indices[index]))

    def prepare_numpy(self) -> None:
        _prepare(self.dataset)

    def get_numpy_batch(self, indices: Sequence[int]) -> Any:
        real = [int(self.indices[i]) for i in indices]
        batch = getattr(self.dataset, "get_numpy_batch", None)
        return batch(real) if batch is not None else numpy_collate([_get_numpy(self.dataset, i) for i in real])


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise RumusError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes: list[int] = [int(c) for c in np.cumsum([len(d) for d in self.datasets])]

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def _find(self, index: int) -> tuple[Any, int]:
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} is out of range for a dataset of {n} samples")
        k = bisect.bisect_right(self.cumulative_sizes, index)
        return self.datasets[k], index - (self.cumulative_sizes[k - 1] if k else 0)

    def __getitem__(self, index: int) -> Any:
        ds, i = self._find(index)
        return ds[i]

    def get_numpy(self, index: int) -> Any:
        ds, i = self._find(index)
        return _get_numpy(ds, i)

    def prepare_numpy(self) -> None:
        for d in self.datasets:
            _prepare(d)


def _get_numpy(dataset: Any, index: int) -> Any:
    get = getattr(dataset, "get_numpy", None)
    return get(index) if get is not None else to_numpy_tree(dataset[index])


def _prepare(dataset: Any) -> None:
    prepare = getattr(dataset, "prepare_numpy", None)
    if prepare is not None:
        prepare()


def numpy_rng(generator: Generator | np.random.Generator | None) -> np.random.Generator:
    if generator is None:
        return default_generator.rng
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, Generator):
        return generator.rng
    raise RumusError(f"generator must be a rumus.Generator, got {type(generator).__name__}")


def random_split(dataset: Any, lengths: Sequence[int | float],
                 generator: Generator | np.random.Generator | None = None) -> list[Subset]:
    """Split into non-overlapping Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0):
        if any(not 0 <= x <= 1 for x in lengths):
            raise RumusError(f"random_split: fractions must lie in [0, 1], got {list(lengths)}")
        sizes = [int(math.floor(n * x)) for x in lengths]
        for k in range(n - sum(sizes)):  # the remainder goes round-robin, as in PyTorch
            sizes[k % len(sizes)] += 1
    else:
        sizes = [int(x) for x in lengths]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise RumusError(f"random_split: lengths {list(lengths)} must be non-negative and sum to the dataset's "
                             f"length {n} (or be fractions summing to 1)")
    perm = numpy_rng(generator).permutation(n)
    out, start = [], 0
    for s in sizes:
        out.append(Subset(dataset, perm[start:start + s].tolist()))
        start += s
    return out

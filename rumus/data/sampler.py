"""Samplers: torch.utils.data's index streams, drawn lazily.

A sampler yields dataset indices; a batch sampler yields lists of them. Every one is lazy — an epoch's
indices are produced as the loader asks for them, so `RandomSampler(ds, replacement=True,
num_samples=10**10)` costs nothing up front. Random draws come from `generator` (a rumus.Generator or
numpy Generator), else from rumus's default generator, as torch's come from torch's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np

from ..random import Generator
from .dataset import numpy_rng

# Random indices are drawn this many at a time: one numpy call per chunk instead of per index, and an
# epoch of any length holds only one chunk (torch draws its replacement samples 32 at a time).
_CHUNK = 4096


class Sampler:
    """Base class: subclasses define `__iter__` (indices) and, where known, `__len__`."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} should be a non-negative integer value, but got {name}={value!r}")
    return int(value)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the dataset's indices, or `num_samples` draws with replacement.

    Without replacement and num_samples > len(data_source), whole permutations follow each other and
    the last is cut short (torch's rule). The first permutation is drawn when iteration starts."""

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | np.random.Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = None if num_samples is None else _check_count("num_samples", num_samples)
        if self._num_samples == 0:
            raise ValueError("num_samples should be a positive integer value, but got num_samples=0")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        rng, n, total = numpy_rng(self.generator), len(self.data_source), self.num_samples
        if self.replacement:
            return _chunks(lambda k: rng.integers(0, n, size=k), total)
        first = rng.permutation(n)  # drawn now: the loader draws its worker seed after the order
        return _permutations(rng, n, total, first)

    def __len__(self) -> int:
        return self.num_samples


def _chunks(draw: Any, total: int) -> Iterator[int]:
    done = 0
    while done < total:
        k = min(_CHUNK, total - done)
        yield from (int(i) for i in draw(k))
        done += k


def _permutations(rng: np.random.Generator, n: int, total: int, first: np.ndarray) -> Iterator[int]:
    order, done = first, 0
    while done < total:
        take = order[:total - done]
        yield from (int(i) for i in take)
        done += len(take)
        if done < total:
            order = rng.permutation(n)


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order drawn each epoch."""

    def __init__(self, indices: Sequence[int], generator: Generator | np.random.Generator | None = None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        order = numpy_rng(self.generator).permutation(len(self.indices))
        return (int(self.indices[int(i)]) for i in order)

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights: Sequence[float] | Any, num_samples: int, replacement: bool = True,
                 generator: Generator | np.random.Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        self.num_samples = _check_count("num_samples", num_samples)
        if self.num_samples == 0:
            raise ValueError("num_samples should be a positive integer value, but got num_samples=0")
        if not replacement and self.num_samples > int(np.count_nonzero(w)):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        self.weights, self.replacement, self.generator = w / w.sum(), replacement, generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_rng(self.generator)
        if self.replacement:
            return _chunks(lambda k: rng.choice(len(self.weights), size=k, p=self.weights), self.num_samples)
        return iter(int(i) for i in rng.choice(len(self.weights), size=self.num_samples, replace=False,
                                               p=self.weights))

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size` (the last one shorter unless drop_last)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler"]

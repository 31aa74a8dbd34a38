"""DataLoader: batches from a map-style dataset, optionally prefetched by background workers.

The batch order comes from the loader's generator alone (one permutation per epoch, drawn in the
main process), so a given seed yields the same batches with 0 or N workers. With the default
collate, workers build numpy batches and the main process wraps them as tensors once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ..random import Generator
from ._workers import ProcessWorkers, ThreadWorkers, note_sample
from .collate import as_tensors, numpy_collate
from .dataset import _get_numpy, _prepare, numpy_rng
from .iterable import IterableDataset, as_numpy
from .sampler import BatchSampler, RandomSampler, SequentialSampler


class _Fetcher:
    """indices -> batch (an int index: one sample, unbatched); picklable, so process workers started with
    spawn can receive it."""

    def __init__(self, dataset: Any, collate_fn: Callable[[Any], Any] | None) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn

    def __call__(self, indices: Sequence[int] | int) -> Any:
        if isinstance(indices, int):  # batch_size=None: torch applies collate_fn to the sample itself
            if self.collate_fn is None:
                return _get_numpy(self.dataset, indices)
            return self.collate_fn(self.dataset[indices])
        if self.collate_fn is None:
            batch = getattr(self.dataset, "get_numpy_batch", None)
            if batch is not None:
                return batch(indices)
            return numpy_collate([self._one(i, _get_numpy) for i in indices])
        return self.collate_fn([self._one(i, _getitem) for i in indices])

    def _one(self, i: int, get: Callable[[Any, int], Any]) -> Any:
        note_sample(i)  # a worker's failure names the sample it was reading
        sample = get(self.dataset, i)
        note_sample(None)
        return sample


def _getitem(dataset: Any, i: int) -> Any:
    return dataset[i]


class DataLoader:
    """torch.utils.data.DataLoader: batches from a map-style dataset (`len()` and `ds[i]`) or an
    IterableDataset, optionally prefetched by background workers. Arguments are torch's, in its order:

    shuffle        -- a new random order every epoch (a RandomSampler over `generator`, a rumus.Generator,
                      else a private generator seeded with `seed`, else rumus's default generator).
    sampler        -- any iterable of indices (rumus.utils.data.RandomSampler, WeightedRandomSampler,
                      DistributedSampler, ...); exclusive with shuffle.
    batch_sampler  -- any iterable of index lists; exclusive with batch_size, shuffle, sampler, drop_last.
    batch_size     -- None: samples one at a time, unbatched (collate_fn, if given, gets each sample).
    Index plans are lazy: a sampler with num_samples=10**10 costs nothing until iterated.
    num_workers    -- background workers; each keeps at most `prefetch_factor` (default 2) batches queued.
    pin_memory, pin_memory_device, persistent_workers, in_order -- accepted as torch's. Host memory needs
                      no pinning here, so pin_memory changes nothing; workers are started per epoch
                      (persistent_workers=True gives the same batches, and worker_init_fn runs once per
                      worker per epoch); batches always arrive in order.
    worker_mode    -- RUMUS's addition: "thread" (the default: no pickling, and numpy gathers and mmap
                      reads need no GIL for long, so it measured 5-10x faster than processes per batch for
                      array and .rrec datasets, see benchmarks/data.py) or "process" (for datasets that
                      spend their time in Python code; batches are pickled through a pipe). Processes
                      start with `multiprocessing_context` (default "fork" on POSIX): with the default
                      collate they only run numpy; a collate_fn that makes rumus tensors inside a forked
                      worker runs the CPU kernels on that worker's one thread (the kernels' thread pool
                      does not survive fork) - use "spawn" or "forkserver" for threaded kernels in workers.
    timeout        -- seconds to wait for any batch from the workers before TimeoutError (0: no limit).
    seed, device   -- RUMUS's additions: a private shuffle seed; where the default collate puts batches
                      (default: RUMUS_BACKEND's device).
    The batch order comes from the sampler alone, drawn in the main process, so a given seed yields the
    same batches with 0 or N workers. A worker's exception re-raises in the caller with the worker's
    traceback; breaking out of the loop (or dropping the iterator) stops the workers.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Iterable[Any] | None = None, batch_sampler: Iterable[Sequence[int]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[Any], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: str | None = None,
                 generator: Generator | np.random.Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True,
                 seed: int | None = None, worker_mode: str = "thread", device: Any = None) -> None:
        if batch_size is not None and int(batch_size) < 1:
            raise RumusError(f"DataLoader: batch_size must be >= 1 or None, got {batch_size}")
        if int(num_workers) < 0:
            raise RumusError(f"DataLoader: num_workers must be >= 0, got {num_workers}")
        if prefetch_factor is not None and num_workers == 0:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. let num_workers "
                             "> 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and int(prefetch_factor) < 1:
            raise RumusError(f"DataLoader: prefetch_factor must be >= 1, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if worker_mode not in ("thread", "process"):
            raise RumusError(f"DataLoader: worker_mode must be 'thread' or 'process', got {worker_mode!r}")
        if generator is not None and seed is not None:
            raise RumusError("DataLoader: pass either generator= or seed=, not both")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler "
                                 "options")
            if num_workers:
                raise RumusError("DataLoader: workers over an IterableDataset are not supported yet; use "
                                 "num_workers=0 (or a map-style Dataset)")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.collate_fn = collate_fn
        self.num_workers = int(num_workers)
        self.prefetch_factor = 2 if prefetch_factor is None else int(prefetch_factor)
        self.pin_memory, self.pin_memory_device = bool(pin_memory), pin_memory_device
        self.persistent_workers, self.in_order = bool(persistent_workers), bool(in_order)
        self.worker_mode, self.worker_init_fn = worker_mode, worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.timeout = float(timeout)
        self.device = device
        self.generator = generator
        self._seeded = np.random.Generator(np.random.PCG64(seed)) if seed is not None else None

    def _index_sampler(self, rng: np.random.Generator) -> Iterable[Any]:
        """What one epoch iterates: index lists (batched) or single indices (batch_size=None)."""
        if self.batch_sampler is not None:
            return self.batch_sampler
        sampler = self.sampler
        if sampler is None:
            sampler = RandomSampler(self.dataset, generator=rng) if self.shuffle else SequentialSampler(self.dataset)
        if self.batch_size is None:
            return sampler
        return BatchSampler(sampler, self.batch_size, self.drop_last)

    def __len__(self) -> int:
        if self._iterable:
            n, bs = len(self.dataset), self.batch_size
            if bs is None:
                return n
            return n // bs if self.drop_last else -(-n // bs)
        return len(self._index_sampler(np.random.default_rng(0)))  # type: ignore[arg-type]

    def _plan(self) -> tuple[Iterator[Any], int]:
        """This epoch's batches of indices (lazily) and the workers' base seed (the same draws for any
        num_workers: the sampler draws its order when iteration starts, then the seed is drawn)."""
        rng = self._seeded if self._seeded is not None else numpy_rng(self.generator)
        batches = iter(self._index_sampler(rng))
        return batches, int(rng.integers(2**62))

    def _finish(self, batch: Any) -> Any:
        return as_tensors(batch, self.device) if self.collate_fn is None else batch

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            return self._from_iterable()
        batches, base_seed = self._plan()
        fetch = _Fetcher(self.dataset, self.collate_fn)
        if self.num_workers == 0:
            return self._serial(batches, fetch)
        return _WorkerIterator(self, batches, fetch, base_seed)

    def _serial(self, batches: Iterator[Any], fetch: _Fetcher) -> Iterator[Any]:
        for indices in batches:
            yield self._finish(fetch(_plain(indices)))

    def _from_iterable(self) -> Iterator[Any]:
        collate = self.collate_fn
        if self.batch_size is None:
            for sample in self.dataset:
                yield self._finish(as_numpy(sample)) if collate is None else collate(sample)
            return
        chunk: list[Any] = []
        for sample in self.dataset:
            chunk.append(sample)
            if len(chunk) == self.batch_size:
                yield self._collate_samples(chunk)
                chunk = []
        if chunk and not self.drop_last:
            yield self._collate_samples(chunk)

    def _collate_samples(self, samples: list[Any]) -> Any:
        if self.collate_fn is not None:
            return self.collate_fn(samples)
        return self._finish(numpy_collate([as_numpy(s) for s in samples]))


def _plain(indices: Any) -> Any:
    """A sampler's item as the fetcher takes it: an int, or a list of ints (numpy/tensor items too)."""
    if isinstance(indices, (int, np.integer)):
        return int(indices)
    if hasattr(indices, "tolist"):
        return indices.tolist()
    return [int(i) for i in indices]


class _WorkerIterator:
    """Keeps up to prefetch_factor x num_workers batches in flight and yields them in order."""

    def __init__(self, loader: DataLoader, batches: Iterator[Any], fetch: _Fetcher, base_seed: int) -> None:
        self._loader = loader
        self._batches = batches
        self._exhausted = False  # the plan has no more batches to submit
        self._next_submit = self._next_out = 0
        self._ready: dict[int, tuple[bool, Any]] = {}
        self._timeout = loader.timeout or None
        self._pool: ThreadWorkers | ProcessWorkers | None = None
        n = loader.num_workers
        if loader.worker_mode == "process":
            _prepare(loader.dataset)  # host caches are built once here, before the fork
            self._pool = ProcessWorkers(n, fetch, loader.dataset, base_seed, loader.worker_init_fn,
                                        loader.multiprocessing_context)
        else:
            self._pool = ThreadWorkers(n, fetch, loader.dataset, base_seed, loader.worker_init_fn)
        for _ in range(loader.prefetch_factor * n):
            self._submit()

    def _submit(self) -> None:
        if self._pool is not None and not self._exhausted:
            indices = next(self._batches, None)
            if indices is None:
                self._exhausted = True
                return
            self._pool.submit(self._next_submit, _plain(indices))
            self._next_submit += 1

    def __iter__(self) -> _WorkerIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        if self._pool is None or self._exhausted and self._next_out >= self._next_submit:
            self.close()
            raise StopIteration
        try:
            while self._next_out not in self._ready:
                b, ok, payload = self._pool.get(self._timeout)
                if b < 0:  # worker_init_fn failed
                    payload.reraise()
                self._ready[b] = (ok, payload)
            ok, payload = self._ready.pop(self._next_out)
            if not ok:
                payload.reraise()
        except BaseException:
            self.close()
            raise
        self._next_out += 1
        self._submit()
        return self._loader._finish(payload)

    def close(self) -> None:
        """Stop the workers (idempotent); called on exhaustion, on error and when the iterator is dropped."""
        pool, self._pool = self._pool, None
        self._ready.clear()
        if pool is not None:
            pool.shutdown()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass  # interpreter shutdown: modules may already be gone

"""DataLoader: batches from a map-style dataset, optionally prefetched by background workers.

The batch order comes from the loader's generator alone (one permutation per epoch, drawn in the
main process), so a given seed yields the same batches with 0 or N workers. With the default
collate, workers build numpy batches and the main process wraps them as tensors once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ..random import Generator
from ._workers import ProcessWorkers, ThreadWorkers, note_sample
from .collate import as_tensors, numpy_collate
from .dataset import _get_numpy, _prepare, numpy_rng


class _Fetcher:
    """indices -> batch; picklable, so process workers started with spawn can receive it."""

    def __init__(self, dataset: Any, collate_fn: Callable[[list[Any]], Any] | None) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn

    def __call__(self, indices: Sequence[int]) -> Any:
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
    """PyTorch-shaped loader over a map-style dataset (`len()` and `ds[i]`).

    shuffle      -- a new permutation every epoch, drawn from `generator` (a rumus.Generator), else
                    from a private generator seeded with `seed`, else from rumus's default generator.
    num_workers  -- background workers; each keeps at most `prefetch_factor` batches queued.
    worker_mode  -- "thread" (the default: no pickling, and numpy gathers and mmap reads need no GIL
                    for long, so it measured 5-10x faster than processes per batch for array and
                    .rrec datasets, see benchmarks/data.py) or "process" (for datasets that spend
                    their time in Python code; batches are pickled through a pipe). Processes
                    start with `multiprocessing_context` (default "fork" on POSIX): with the
                    default collate they only run numpy; a collate_fn that makes rumus tensors
                    inside a forked worker runs the CPU kernels on that worker's one thread (the
                    kernels' thread pool does not survive fork) - use "spawn" or "forkserver" for
                    threaded kernels in workers.
    timeout      -- seconds to wait for any batch from the workers before TimeoutError (0: no limit).
    device       -- where the default collate puts batches (default: RUMUS_BACKEND's device).
    A worker's exception re-raises in the caller with the worker's traceback; breaking out of the
    loop (or dropping the iterator) stops the workers.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 collate_fn: Callable[[list[Any]], Any] | None = None, num_workers: int = 0,
                 prefetch_factor: int = 2, generator: Generator | np.random.Generator | None = None,
                 seed: int | None = None, worker_mode: str = "thread",
                 worker_init_fn: Callable[[int], None] | None = None, timeout: float = 0,
                 multiprocessing_context: str | None = None, device: Any = None) -> None:
        if int(batch_size) < 1:
            raise RumusError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if int(num_workers) < 0:
            raise RumusError(f"DataLoader: num_workers must be >= 0, got {num_workers}")
        if int(prefetch_factor) < 1:
            raise RumusError(f"DataLoader: prefetch_factor must be >= 1, got {prefetch_factor}")
        if worker_mode not in ("thread", "process"):
            raise RumusError(f"DataLoader: worker_mode must be 'thread' or 'process', got {worker_mode!r}")
        if generator is not None and seed is not None:
            raise RumusError("DataLoader: pass either generator= or seed=, not both")
        self.dataset = dataset
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), bool(shuffle), bool(drop_last)
        self.collate_fn = collate_fn
        self.num_workers, self.prefetch_factor = int(num_workers), int(prefetch_factor)
        self.worker_mode, self.worker_init_fn = worker_mode, worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.timeout = float(timeout)
        self.device = device
        self.generator = generator
        self._seeded = np.random.Generator(np.random.PCG64(seed)) if seed is not None else None

    def __len__(self) -> int:
        n, bs = len(self.dataset), self.batch_size
        return n // bs if self.drop_last else -(-n // bs)

    def _plan(self) -> tuple[list[np.ndarray], int]:
        """This epoch's batches of indices and the workers' base seed (same draws for any num_workers)."""
        rng = self._seeded if self._seeded is not None else numpy_rng(self.generator)
        n = len(self.dataset)
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        base_seed = int(rng.integers(2**62))
        stop = len(self) * self.batch_size if self.drop_last else n
        return [order[i:min(i + self.batch_size, n)] for i in range(0, stop, self.batch_size)], base_seed

    def _finish(self, batch: Any) -> Any:
        return as_tensors(batch, self.device) if self.collate_fn is None else batch

    def __iter__(self) -> Iterator[Any]:
        batches, base_seed = self._plan()
        fetch = _Fetcher(self.dataset, self.collate_fn)
        if self.num_workers == 0:
            return self._serial(batches, fetch)
        return _WorkerIterator(self, batches, fetch, base_seed)

    def _serial(self, batches: list[np.ndarray], fetch: _Fetcher) -> Iterator[Any]:
        for indices in batches:
            yield self._finish(fetch(indices.tolist()))


class _WorkerIterator:
    """Keeps up to prefetch_factor x num_workers batches in flight and yields them in order."""

    def __init__(self, loader: DataLoader, batches: list[np.ndarray], fetch: _Fetcher, base_seed: int) -> None:
        self._loader = loader
        self._batches = batches
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
        if self._pool is not None and self._next_submit < len(self._batches):
            b = self._next_submit
            self._pool.submit(b, self._batches[b].tolist())
            self._next_submit += 1

    def __iter__(self) -> _WorkerIterator:
        return self

    def __len__(self) -> int:
        return len(self._batches)

    def __next__(self) -> Any:
        if self._next_out >= len(self._batches) or self._pool is None:
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

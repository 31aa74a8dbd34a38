"""DataLoader worker pools: threads (the default) or processes, one task queue per worker.

Batch b goes to worker b % num_workers (as in PyTorch), results come back on one queue tagged with
b, and the loader reorders them, so the batch order never depends on the number of workers.
A failing fetch is caught in the worker and sent back as an _Failure that re-raises in the caller.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Fetch = Callable[[Any], Any]  # indices -> batch (runs in the worker)


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: Any


_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: its id, the worker count, its seed and the dataset; else None."""
    return getattr(_local, "info", None)


class _Failure:
    """An exception raised in a worker; `reraise()` raises it in the caller with the worker's traceback."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.where = where
        self.text = "".join(traceback.format_exception(exc))
        self.exc: BaseException | None = exc  # threads hand over the object itself
        self.exc_type: type[BaseException] = type(exc)
        self.args = exc.args

    def __getstate__(self) -> dict[str, Any]:
        # processes send type + args + text; exotic exception types fall back to RuntimeError
        state = dict(self.__dict__, exc=None)
        try:
            pickle.dumps((self.exc_type, self.args))
        except Exception:
            state.update(exc_type=RuntimeError, args=(f"{self.exc_type.__name__}: {self.args}",))
        return state

    def reraise(self) -> None:
        exc = self.exc
        if exc is not None:
            exc.add_note(f"(raised in {self.where})")
            raise exc
        try:
            exc = self.exc_type(*self.args)
        except Exception:
            exc = RuntimeError(f"{self.exc_type.__name__}: {self.args}")
        exc.add_note(f"Original traceback in {self.where}:\n{self.text}")
        raise exc


def _serve(info: WorkerInfo, fetch: Fetch, init_fn: Callable[[int], None] | None, tasks: Any, results: Any,
           stop: Any, kind: str) -> None:
    """The worker loop (both kinds): take (batch_no, indices), put (batch_no, ok, batch or _Failure)."""
    _local.info = info
    if init_fn is not None:
        try:
            init_fn(info.id)
        except BaseException as exc:
            results.put((-1, False, _Failure(exc, f"worker_init_fn of DataLoader worker {kind} {info.id}")))
            return
    parent = os.getppid()
    while not stop.is_set():
        try:
            task = tasks.get(timeout=0.5)
        except queue.Empty:
            if kind == "process" and os.getppid() != parent:
                return  # the loader's process is gone: nobody will read our results
            continue
        if task is None or stop.is_set():
            return
        b, indices = task
        try:
            out = (b, True, fetch(indices))
        except BaseException as exc:
            out = (b, False, _Failure(exc, f"DataLoader worker {kind} {info.id} while fetching batch {b}"))
        results.put(out)


class ThreadWorkers:
    """Workers in threads: no pickling, instant start; numpy copies and mmap reads release the GIL."""

    kind = "thread"

    def __init__(self, n: int, fetch: Fetch, dataset: Any, base_seed: int,
                 init_fn: Callable[[int], None] | None) -> None:
        self._stop = threading.Event()
        self._tasks: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue() for _ in range(n)]
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=_serve, name=f"rumus-dataloader-{w}", daemon=True,
                             args=(WorkerInfo(w, n, base_seed + w, dataset), fetch, init_fn, self._tasks[w],
                                   self._results, self._stop, self.kind))
            for w in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, b: int, indices: Any) -> None:
        self._tasks[b % len(self._tasks)].put((b, indices))

    def get(self, timeout: float | None) -> tuple[int, bool, Any]:
        try:
            return self._results.get(timeout=timeout)  # type: ignore[no-any-return]
        except queue.Empty:
            raise TimeoutError(f"DataLoader timed out after {timeout} s waiting for a batch") from None

    def shutdown(self) -> None:
        self._stop.set()
        for q in self._tasks:
            q.put(None)
        deadline = time.monotonic() + 1.0
        for t in self._threads:  # a fetch still running after the deadline ends on its own (daemon thread)
            t.join(timeout=max(0.0, deadline - time.monotonic()))


def _process_main(info: WorkerInfo, fetch: Fetch, init_fn: Callable[[int], None] | None, tasks: Any,
                  results: Any, stop: Any) -> None:
    # each process has its own global RNGs: seed them so augmentations differ per worker, reproducibly
    random.seed(info.seed)
    np.random.seed(info.seed % 2**32)
    try:
        from ..random import manual_seed
        manual_seed(info.seed)
    except Exception:
        pass
    _serve(info, fetch, init_fn, tasks, results, stop, "process")
    if stop.is_set():
        results.cancel_join_thread()  # the loader stopped listening: exit without flushing the pipe


class ProcessWorkers:
    """Workers in processes (fork where available): true parallelism for Python-heavy samples, at
    the price of pickling every batch through a pipe."""

    kind = "process"

    def __init__(self, n: int, fetch: Fetch, dataset: Any, base_seed: int,
                 init_fn: Callable[[int], None] | None, start_method: str | None = None) -> None:
        method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        ctx: Any = mp.get_context(method)
        self._stop = ctx.Event()
        self._tasks = [ctx.Queue() for _ in range(n)]
        self._results = ctx.Queue()
        self._procs = [
            ctx.Process(target=_process_main, name=f"rumus-dataloader-{w}", daemon=True,
                        args=(WorkerInfo(w, n, base_seed + w, dataset), fetch, init_fn, self._tasks[w],
                              self._results, self._stop))
            for w in range(n)]
        started = []
        try:
            for p in self._procs:
                p.start()  # with spawn this pickles the dataset, which may fail
                started.append(p)
        except BaseException:
            self._procs = started
            self.shutdown()
            raise

    def submit(self, b: int, indices: Any) -> None:
        self._tasks[b % len(self._tasks)].put((b, indices))

    def get(self, timeout: float | None) -> tuple[int, bool, Any]:
        waited = 0.0
        while True:
            try:
                return self._results.get(timeout=0.25)  # type: ignore[no-any-return]
            except queue.Empty:
                waited += 0.25
            dead = [(w, p.exitcode) for w, p in enumerate(self._procs) if p.exitcode is not None]
            if dead:
                w, code = dead[0]
                raise RuntimeError(f"DataLoader worker process {w} exited unexpectedly (exit code {code})")
            if timeout is not None and waited >= timeout:
                raise TimeoutError(f"DataLoader timed out after {timeout} s waiting for a batch")

    def shutdown(self) -> None:
        self._stop.set()
        for q in self._tasks:
            q.put(None)
        deadline = time.monotonic() + 2.0
        for p in self._procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)
        for q in [*self._tasks, self._results]:
            q.cancel_join_thread()  # never block interpreter exit on undelivered queue data
            q.close()

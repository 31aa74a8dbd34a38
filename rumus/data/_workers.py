"""DataLoader worker pools: threads (the default) or processes, one task queue per worker.

Batch b goes to worker b % num_workers (as in PyTorch), results come back on one queue tagged with
b, and the loader reorders them, so the batch order never depends on the number of workers.
A failing fetch is caught in the worker and sent back as an _Failure that re-raises in the caller.
What must never reach the caller as itself is a worker's SystemExit / KeyboardInterrupt (re-raised in the
main process it would end the training script, with status 0 for sys.exit(0)): it becomes a WorkerError
naming the worker and the sample. A process worker pickles its batch itself, so an unpicklable sample is
a WorkerError naming its type instead of a batch the queue's feeder thread drops (the loader would wait
for it forever), and a worker that dies (os._exit, a signal, the OOM killer) is one too.
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

from rumus_contracts import RumusError

Fetch = Callable[[Any], Any]  # indices -> batch (runs in the worker)


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: Any


_local = threading.local()


class WorkerError(RumusError, RuntimeError):
    """A DataLoader worker exited, died, or produced a batch it could not send; the message names the worker
    and the sample (RuntimeError, as PyTorch's "DataLoader worker (pid X) exited unexpectedly")."""


def note_sample(index: Any) -> None:
    """The sample this worker thread is reading now (named if the read fails, or if the process dies)."""
    _local.sample = index
    shared = getattr(_local, "shared", None)
    if shared is not None:
        shared[1].value = -1 if index is None else int(index)


def _current_sample(indices: Any) -> str:
    index = getattr(_local, "sample", None)
    return f"sample index {index}" if index is not None else f"the batch of sample indices {_short(indices)}"


def _short(indices: Any) -> str:
    items = list(indices)
    return str(items) if len(items) <= 8 else f"[{', '.join(map(str, items[:8]))}, ...] ({len(items)} samples)"


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
        if not issubclass(self.exc_type, Exception):  # SystemExit, KeyboardInterrupt, GeneratorExit
            raise WorkerError(f"{self.where}: the worker raised {self.exc_type.__name__}{self.args!r} (e.g. "
                              f"sys.exit() in __getitem__ or collate_fn); a sample must be returned or an "
                              f"Exception raised. Worker traceback:\n{self.text}")
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
           stop: Any, kind: str, shared: Any = None) -> None:
    """The worker loop (both kinds): take (batch_no, indices), put (batch_no, ok, batch or _Failure).
    shared (processes): two shared integers, the batch and the sample being read, for a death report."""
    _local.info = info
    _local.shared = shared
    if init_fn is not None:
        try:
            init_fn(info.id)
        except BaseException as exc:
            failure = (-1, False, _Failure(exc, f"worker_init_fn of DataLoader worker {kind} {info.id}"))
            results.put(_pickled(failure, f"DataLoader worker {kind} {info.id}", []) if kind == "process"
                        else failure)
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
        who = f"DataLoader worker {kind} {info.id}" + (f" (pid {os.getpid()})" if kind == "process" else "")
        if shared is not None:
            shared[0].value = b
        note_sample(None)
        try:
            out: Any = (b, True, fetch(indices))
        except BaseException as exc:
            out = (b, False, _Failure(exc, f"{who} while fetching batch {b}, {_current_sample(indices)}"))
        if kind == "process":
            out = _pickled(out, who, indices)
        results.put(out)


def _pickled(out: tuple[int, bool, Any], who: str, indices: Any) -> bytes:
    """The result as bytes, pickled here where a failure can still be reported (the queue's feeder thread
    would print it and drop the batch)."""
    try:
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        culprit = _unpicklable_part(out[2])
        err = WorkerError(f"{who}: batch {out[0]} (sample indices {_short(indices)}) cannot be sent to the main "
                          f"process: {culprit} cannot be pickled ({type(exc).__name__}: {str(exc)[:200]}). Return "
                          f"numpy arrays / tensors / builtins from __getitem__ and collate_fn, or use "
                          f"worker_mode='thread'")
        return pickle.dumps((out[0], False, _Failure(err, who)), protocol=pickle.HIGHEST_PROTOCOL)


def _unpicklable_part(value: Any, path: str = "the batch", depth: int = 0) -> str:
    """'the batch[0]['image'] of type Foo': the innermost piece of a batch that does not pickle."""
    if depth < 8:
        items: list[tuple[str, Any]] = []
        if isinstance(value, (list, tuple)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, dict):
            items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
        for sub, v in items:
            try:
                pickle.dumps(v)
            except Exception:
                return _unpicklable_part(v, sub, depth + 1)
    return f"{path} of type {type(value).__module__}.{type(value).__qualname__}"


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


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    import signal
    try:
        return f" (killed by {signal.Signals(-code).name})"
    except ValueError:
        return ""


def _process_main(info: WorkerInfo, fetch: Fetch, init_fn: Callable[[int], None] | None, tasks: Any,
                  results: Any, stop: Any, shared: Any) -> None:
    # each process has its own global RNGs: seed them so augmentations differ per worker, reproducibly
    random.seed(info.seed)
    np.random.seed(info.seed % 2**32)
    try:
        from ..random import manual_seed
        manual_seed(info.seed)
    except Exception:
        pass
    _serve(info, fetch, init_fn, tasks, results, stop, "process", shared)
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
        self._pending: dict[int, list[tuple[int, Any]]] = {w: [] for w in range(n)}  # sent, not yet back
        # each worker's (batch, sample) being read now, -1 when none: what a dead worker was doing
        self._doing = [(ctx.Value("q", -1, lock=False), ctx.Value("q", -1, lock=False)) for _ in range(n)]
        self._procs = [
            ctx.Process(target=_process_main, name=f"rumus-dataloader-{w}", daemon=True,
                        args=(WorkerInfo(w, n, base_seed + w, dataset), fetch, init_fn, self._tasks[w],
                              self._results, self._stop, self._doing[w]))
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
        self._pending[b % len(self._tasks)].append((b, indices))
        self._tasks[b % len(self._tasks)].put((b, indices))

    def get(self, timeout: float | None) -> tuple[int, bool, Any]:
        waited = 0.0
        while True:
            try:
                data = self._results.get(timeout=0.25)
                return self._received(data)
            except queue.Empty:
                waited += 0.25
            dead = [(w, p) for w, p in enumerate(self._procs) if p.exitcode is not None]
            if dead:
                w, p = dead[0]
                b, i = (int(v.value) for v in self._doing[w])
                indices = dict(self._pending.get(w) or []).get(b)
                doing = "between batches" if b < 0 else f"while fetching batch {b}" + (
                    f", sample index {i}" if i >= 0 else f" (sample indices {_short(indices or [])})")
                raise WorkerError(f"DataLoader worker process {w} (pid {p.pid}) exited unexpectedly {doing} with "
                                  f"exit code {p.exitcode}{_signal_name(p.exitcode)}")
            if timeout is not None and waited >= timeout:
                raise TimeoutError(f"DataLoader timed out after {timeout} s waiting for a batch")

    def _received(self, data: bytes) -> tuple[int, bool, Any]:
        try:
            b, ok, payload = pickle.loads(data)
        except Exception as exc:
            raise WorkerError(f"a batch from a DataLoader worker process cannot be unpickled in the main process "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None
        if b >= 0:
            w = b % len(self._tasks)
            self._pending[w] = [t for t in self._pending[w] if t[0] != b]
        return b, ok, payload

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

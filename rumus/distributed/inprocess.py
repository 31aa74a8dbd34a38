"""The in-process Communicator: several ranks as threads of one process (one per device: several
wgpu adapters, or several CPU "devices" for tests), meeting at a shared rendezvous.

Each rank runs its collectives in order on a private worker thread, so `async_op=True` really
overlaps with the rank's own work; a collective deposits a *copy* of the rank's buffer in a shared
slot, waits at a barrier, computes the result from all slots in rank order (so every rank gets the
same bits), waits again, then writes its buffer. A rank that raises aborts the barrier; every peer
then raises CommunicatorError naming the first failure, and `spawn` re-raises the original error.

Turn-taking: grad mode is per thread, but the backends are not yet safe to drive from several threads
at once (rumus_wgpu's recorder; the CPU backend's one thread pool that BLAS jobs also run on), so
`spawn` lets one rank compute at a time (the "turn"): a rank gives the turn away while it blocks in a
collective and takes it back afterwards. The communication itself runs outside the turn.

Known limit: two ranks driving the same wgpu device from two threads broke the WebGPU backend's
state (seen in tests); give each rank its own device (or cpu) until rumus_wgpu is thread-safe.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from rumus_contracts.communicator import (
    CommunicatorError, ReduceOp, Work, check_all_gather, check_buffer, check_reduce_scatter,
)

from ..autograd import grad_mode


T = TypeVar("T")

_REDUCE: dict[ReduceOp, Callable[[Sequence[np.ndarray]], np.ndarray]] = {
    ReduceOp.SUM: lambda xs: _fold(np.add, xs),
    ReduceOp.AVG: lambda xs: _fold(np.add, xs) / len(xs),
    ReduceOp.MAX: lambda xs: _fold(np.maximum, xs),
    ReduceOp.MIN: lambda xs: _fold(np.minimum, xs),
}


def _fold(f: Any, xs: Sequence[np.ndarray]) -> np.ndarray:
    acc = xs[0].copy()
    for x in xs[1:]:  # rank order, so every rank computes the same bits
        acc = f(acc, x)
    return np.asarray(acc)


class _Turn:
    """One rank computes at a time (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()

    def held(self) -> bool:
        return bool(getattr(self.local, "held", False))

    def acquire(self) -> None:
        self.lock.acquire()
        self.local.held = True

    def release(self) -> None:
        self.local.held = False
        self.lock.release()


class InProcessGroup:
    """The shared rendezvous of `world_size` in-process ranks."""

    def __init__(self, world_size: int, timeout_s: float = 120.0) -> None:
        if world_size < 1:
            raise CommunicatorError(f"InProcessGroup: world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.timeout_s = float(timeout_s)
        self._barrier = threading.Barrier(world_size, timeout=self.timeout_s)
        self._slots: list[Any] = [None] * world_size
        self._mail: dict[tuple[int, int, int], queue.Queue[np.ndarray]] = {}
        self._mail_lock = threading.Lock()
        self.failure: str | None = None
        self.turn = _Turn()

    def communicator(self, rank: int, device: Any = None) -> InProcessCommunicator:
        if not 0 <= rank < self.world_size:
            raise CommunicatorError(f"rank {rank} outside a group of {self.world_size}")
        return InProcessCommunicator(self, rank, device)

    def abort(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        self._barrier.abort()

    def _wait_barrier(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            if self.failure is None:
                self.failure = f"a rank did not reach a collective within {self.timeout_s:g} s"
            raise CommunicatorError(f"in-process group aborted: {self.failure}") from None

    def exchange(self, rank: int, contribution: Any) -> list[Any]:
        """Every rank's contribution, in rank order (each rank passes its own copy)."""
        self._slots[rank] = contribution
        self._wait_barrier()
        everything = list(self._slots)
        self._wait_barrier()  # nobody refills a slot before all have read them
        return everything

    def mailbox(self, src: int, dst: int, tag: int) -> queue.Queue[np.ndarray]:
        with self._mail_lock:
            return self._mail.setdefault((src, dst, tag), queue.Queue())


class _FutureWork:
    def __init__(self, future: Future[None], turn: _Turn) -> None:
        self._future, self._turn = future, turn

    def is_completed(self) -> bool:
        return self._future.done()

    def wait(self) -> None:
        if self._future.done() or not self._turn.held():
            self._future.result()
            return
        self._turn.release()  # let the other ranks compute while this one waits
        try:
            self._future.result()
        finally:
            self._turn.acquire()


class InProcessCommunicator:
    """Rank `rank` of an InProcessGroup; implements rumus_contracts.Communicator."""

    def __init__(self, group: InProcessGroup, rank: int, device: Any = None) -> None:
        self.group, self._rank, self.device = group, rank, device
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rumus-rank{rank}-comm")

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self.group.world_size

    def _run(self, job: Callable[[], None], async_op: bool) -> Work:
        if self.group.failure is not None:
            raise CommunicatorError(f"in-process group aborted: {self.group.failure}")
        work = _FutureWork(self._worker.submit(job), self.group.turn)
        if not async_op:
            work.wait()
        return work

    def all_reduce(self, buf: np.ndarray, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work:
        check_buffer(buf, "all_reduce", op)

        def job() -> None:
            parts = self._exchange("all_reduce", (buf.dtype, buf.shape, op), buf.copy())
            buf[...] = _REDUCE[op](parts).astype(buf.dtype, copy=False)
        return self._run(job, async_op)

    def broadcast(self, buf: np.ndarray, src: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "broadcast")
        self._check_rank(src, "broadcast src")

        def job() -> None:
            parts = self._exchange("broadcast", (buf.dtype, buf.shape, src), buf.copy() if self._rank == src else None)
            buf[...] = parts[src]
        return self._run(job, async_op)

    def all_gather(self, send: np.ndarray, recv: np.ndarray, async_op: bool = False) -> Work:
        check_all_gather(send, recv, self.world_size)

        def job() -> None:
            recv[...] = np.stack(self._exchange("all_gather", (send.dtype, send.shape), send.copy()))
        return self._run(job, async_op)

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work:
        check_reduce_scatter(send, recv, self.world_size, op)
        n = recv.size
        lo = self._rank * n

        def job() -> None:
            everyone = self._exchange("reduce_scatter", (send.dtype, send.shape, op), send.reshape(-1).copy())
            chunks = [m[lo:lo + n] for m in everyone]  # chunk `rank` of every rank's send
            recv.reshape(-1)[...] = _REDUCE[op](chunks).astype(recv.dtype, copy=False)
        return self._run(job, async_op)

    def send(self, buf: np.ndarray, dst: int, tag: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "send")
        self._check_rank(dst, "send dst")
        self.group.mailbox(self._rank, dst, tag).put(buf.copy())  # buffered: never blocks
        return _FutureWork(_done_future(), self.group.turn)

    def recv(self, buf: np.ndarray, src: int, tag: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "recv")
        self._check_rank(src, "recv src")
        box = self.group.mailbox(src, self._rank, tag)
        deadline = time.monotonic() + self.group.timeout_s

        def job() -> None:
            while True:
                if self.group.failure is not None:
                    raise CommunicatorError(f"in-process group aborted: {self.group.failure}")
                try:
                    got = box.get(timeout=0.05)
                    break
                except queue.Empty:
                    if time.monotonic() > deadline:
                        self.group.abort(f"rank {self._rank} waited more than {self.group.timeout_s:g} s "
                                         f"for a message from rank {src} (tag {tag})")
            if got.shape != buf.shape or got.dtype != buf.dtype:
                raise CommunicatorError(f"recv: rank {src} sent {got.shape} {got.dtype}, the receive buffer "
                                        f"is {buf.shape} {buf.dtype}")
            buf[...] = got
        return self._run(job, async_op)

    def barrier(self) -> None:
        def job() -> None:
            self._exchange("barrier", (), None)
        self._run(job, False)

    def _exchange(self, what: str, signature: tuple[Any, ...], data: Any) -> list[Any]:
        """Every rank's data, after checking that every rank called `what` with the same dtype / shape / op
        (the signatures travel with the data: the check costs nothing). All ranks see the same table, so
        all raise together."""
        everyone = self.group.exchange(self._rank, ((what, *signature), data))
        sigs = [sig for sig, _ in everyone]
        if any(sig != sigs[0] for sig in sigs):
            shown = "; ".join(f"rank {r}: {' '.join(map(str, sig))}" for r, sig in enumerate(sigs))
            raise CommunicatorError(f"{what} on rank {self._rank}: the ranks disagree ({shown}); every rank must "
                                    f"call the same collective with the same dtype and shape")
        return [d for _, d in everyone]

    def abort(self, reason: str) -> None:
        self.group.abort(reason)

    def close(self) -> None:
        self._worker.shutdown(wait=False)

    def _check_rank(self, r: int, what: str) -> None:
        if not 0 <= r < self.world_size:
            raise CommunicatorError(f"{what}: rank {r} outside a group of {self.world_size}")


def _done_future() -> Future[None]:
    f: Future[None] = Future()
    f.set_result(None)
    return f


def spawn(fn: Callable[[InProcessCommunicator], T], world_size: int, devices: Sequence[Any] | None = None,
          timeout_s: float = 120.0) -> list[T]:
    """Run `fn(comm)` on `world_size` rank threads (rank r on `devices[r]`, exposed as `comm.device`),
    each with `comm` as its thread's default communicator. Returns the ranks' results in rank order;
    if a rank raises, every rank stops and the first rank's original exception is re-raised."""
    from .state import set_thread_communicator

    if devices is not None and len(devices) != world_size:
        raise CommunicatorError(f"spawn: {len(devices)} devices for {world_size} ranks")
    group = InProcessGroup(world_size, timeout_s)
    results: list[Any] = [None] * world_size
    errors: list[tuple[int, BaseException] | None] = [None] * world_size
    first: list[int] = []

    def main(rank: int) -> None:
        comm = group.communicator(rank, None if devices is None else devices[rank])
        set_thread_communicator(comm)
        group.turn.acquire()
        grad_mode.state.enabled = True  # a fresh rank starts in grad mode, whatever the last rank left
        try:
            results[rank] = fn(comm)
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the caller
            errors[rank] = (rank, exc)
            if not isinstance(exc, CommunicatorError) or group.failure is None:
                first.append(rank)
                group.abort(f"rank {rank} raised {type(exc).__name__}: {exc}")
        finally:
            group.turn.release()
            set_thread_communicator(None)
            comm.close()

    threads = [threading.Thread(target=main, args=(r,), name=f"rumus-rank{r}", daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s * 4)
        if t.is_alive():
            group.abort("spawn: a rank thread did not finish")
            raise CommunicatorError(f"spawn: {t.name} still running after {timeout_s * 4:g} s")
    if first:
        rank, exc = errors[first[0]]  # type: ignore[misc]
        raise exc
    for err in errors:
        if err is not None:
            raise err[1]
    return results

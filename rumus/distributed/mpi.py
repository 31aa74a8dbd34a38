"""The MPI Communicator (mpi4py over Open MPI's wheels): the same script runs on one machine or on a
cluster with `mpirun`/`rumus launch`. Every operation is MPI's nonblocking form; `wait()` polls it
with a deadline, so a peer that died or never arrives ends in an error, not a hang."""

from __future__ import annotations

import sys
import time
import traceback
from types import TracebackType
from typing import Any

import numpy as np

from rumus_contracts.communicator import (
    CommunicatorError, ReduceOp, Work, check_all_gather, check_buffer, check_reduce_scatter,
)

DEFAULT_TIMEOUT_S = 600.0


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise CommunicatorError("the MPI communicator needs mpi4py and an MPI: pip install 'rumus[dist]' "
                                "(mpi4py + Open MPI's wheel)") from exc
    return MPI


class _RequestWork:
    """An MPI request; `after` runs once it completed (e.g. AVG's division)."""

    def __init__(self, comm: MPICommunicator, request: Any, what: str, after: Any = None) -> None:
        self._comm, self._req, self._what, self._after = comm, request, what, after
        self._done = False

    def is_completed(self) -> bool:
        if not self._done and self._req.Test():
            self._finish()
        return self._done

    def wait(self) -> None:
        start = time.monotonic()
        deadline = start + self._comm.timeout_s
        pause = 1e-5
        while not self.is_completed():
            now = time.monotonic()
            if now - start < 2e-3:
                continue  # spin first: most messages land within microseconds, a sleep would add latency
            if now > deadline:
                raise CommunicatorError(f"rank {self._comm.rank}: {self._what} did not complete within "
                                        f"{self._comm.timeout_s:g} s (a peer died, hangs, or called a different "
                                        f"collective)")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _finish(self) -> None:
        self._done = True
        if self._after is not None:
            self._after()


class MPICommunicator:
    """Implements rumus_contracts.Communicator over an mpi4py communicator (COMM_WORLD by default)."""

    def __init__(self, comm: Any = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._MPI = _mpi()
        self._comm = comm if comm is not None else self._MPI.COMM_WORLD
        self.timeout_s = float(timeout_s)

    @property
    def rank(self) -> int:
        return int(self._comm.Get_rank())

    @property
    def world_size(self) -> int:
        return int(self._comm.Get_size())

    def _op(self, op: ReduceOp, dtype: np.dtype) -> Any:
        M = self._MPI
        if dtype == np.bool_:  # MPI reduces C_BOOL only with logical operations
            return {ReduceOp.MAX: M.LOR, ReduceOp.MIN: M.LAND}[op]
        return {ReduceOp.SUM: M.SUM, ReduceOp.AVG: M.SUM, ReduceOp.MAX: M.MAX, ReduceOp.MIN: M.MIN}[op]

    def _finish(self, work: Work, async_op: bool) -> Work:
        if not async_op:
            work.wait()
        return work

    def _avg(self, buf: np.ndarray, op: ReduceOp) -> Any:
        if op is not ReduceOp.AVG:
            return None
        n = self.world_size
        return lambda: np.divide(buf, n, out=buf)

    def all_reduce(self, buf: np.ndarray, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work:
        check_buffer(buf, "all_reduce", op)
        req = self._comm.Iallreduce(self._MPI.IN_PLACE, buf, self._op(op, buf.dtype))
        return self._finish(_RequestWork(self, req, "all_reduce", self._avg(buf, op)), async_op)

    def broadcast(self, buf: np.ndarray, src: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "broadcast")
        return self._finish(_RequestWork(self, self._comm.Ibcast(buf, root=src), "broadcast"), async_op)

    def all_gather(self, send: np.ndarray, recv: np.ndarray, async_op: bool = False) -> Work:
        check_all_gather(send, recv, self.world_size)
        return self._finish(_RequestWork(self, self._comm.Iallgather(send, recv), "all_gather"), async_op)

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work:
        check_reduce_scatter(send, recv, self.world_size, op)
        req = self._comm.Ireduce_scatter_block(send, recv, self._op(op, send.dtype))
        return self._finish(_RequestWork(self, req, "reduce_scatter", self._avg(recv, op)), async_op)

    def send(self, buf: np.ndarray, dst: int, tag: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "send")
        return self._finish(_RequestWork(self, self._comm.Isend(buf, dest=dst, tag=tag), f"send to {dst}"), async_op)

    def recv(self, buf: np.ndarray, src: int, tag: int = 0, async_op: bool = False) -> Work:
        check_buffer(buf, "recv")
        return self._finish(_RequestWork(self, self._comm.Irecv(buf, source=src, tag=tag), f"recv from {src}"),
                            async_op)

    def barrier(self) -> None:
        _RequestWork(self, self._comm.Ibarrier(), "barrier").wait()

    def abort(self, reason: str) -> None:
        sys.stderr.write(f"rumus.distributed: rank {self.rank} aborts the job: {reason}\n")
        sys.stderr.flush()
        self._comm.Abort(1)


def install_abort_on_error(comm: MPICommunicator) -> None:
    """An uncaught exception on this rank prints its traceback and aborts every rank (mpirun then
    exits non-zero), so no peer waits forever in a collective."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        sys.stderr.write(f"rumus.distributed: rank {comm.rank} raised:\n")
        sys.stderr.write("".join(traceback.format_exception(kind, exc, tb)))
        sys.stderr.flush()
        try:
            comm.abort(f"{kind.__name__}: {exc}")
        finally:
            previous(kind, exc, tb)

    sys.excepthook = hook

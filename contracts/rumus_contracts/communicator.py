"""The Communicator port: collectives and point-to-point messages between the ranks of a job.

The port works on *host* numpy buffers (C-contiguous, one of the dtypes in `COMM_DTYPES`). Tensors of
any backend reach it through the core (`rumus.distributed`), which stages them: it reads a device
buffer with the backend's `to_numpy` (in chunks, so the next chunk downloads while the previous one is
being reduced), hands the host chunk to the communicator, and writes the result back with
`from_numpy`. A communicator therefore never sees a device, only memory every transport can address.

Every rank must call the same collectives in the same order (MPI's rule). A call with `async_op=True`
returns a `Work` at once; the buffer must not be touched until `Work.wait()` returned. A failure or a
peer that never arrives raises `CommunicatorError` (after `timeout_s`) instead of hanging.
"""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

import numpy as np

from .errors import RumusError

__all__ = ["COMM_DTYPES", "CommunicatorError", "Communicator", "CompletedWork", "ReduceOp", "Work",
           "check_buffer"]

# dtypes every transport reduces natively (float16/bfloat16 are widened to float32 by the core).
COMM_DTYPES: frozenset[np.dtype] = frozenset(np.dtype(d) for d in (
    np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_))


class CommunicatorError(RumusError):
    """A collective failed: a peer raised or timed out, a buffer is unusable, ranks disagree."""


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"   # SUM divided by world_size; integers refuse it (it would truncate silently)
    MAX = "max"
    MIN = "min"


@runtime_checkable
class Work(Protocol):
    """The handle of an asynchronous collective."""

    def wait(self) -> None:
        """Block until the operation finished (its output buffer is valid); raises CommunicatorError."""

    def is_completed(self) -> bool:
        """True once wait() would return at once."""


class CompletedWork:
    """The handle of an operation that already finished (synchronous transports)."""

    def wait(self) -> None:
        return None

    def is_completed(self) -> bool:
        return True


@runtime_checkable
class Communicator(Protocol):
    """One rank's view of a group of `world_size` ranks. Buffers are host numpy arrays."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    def all_reduce(self, buf: np.ndarray, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work:
        """In place: every rank's `buf` becomes the reduction of all ranks' `buf`."""

    def broadcast(self, buf: np.ndarray, src: int = 0, async_op: bool = False) -> Work:
        """In place: every rank's `buf` becomes rank `src`'s."""

    def all_gather(self, send: np.ndarray, recv: np.ndarray, async_op: bool = False) -> Work:
        """`recv` (shape (world_size, *send.shape)) receives every rank's `send`, in rank order."""

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: ReduceOp = ReduceOp.SUM,
                       async_op: bool = False) -> Work:
        """`send` has world_size equal chunks along its flat order; rank r's `recv` gets the reduction of
        every rank's chunk r."""

    def send(self, buf: np.ndarray, dst: int, tag: int = 0, async_op: bool = False) -> Work:
        """Send `buf` to rank `dst`; matched by a `recv` there with the same tag."""

    def recv(self, buf: np.ndarray, src: int, tag: int = 0, async_op: bool = False) -> Work:
        """Receive into `buf` (its shape and dtype must match what `src` sent)."""

    def barrier(self) -> None:
        """Return once every rank has entered the barrier."""

    def abort(self, reason: str) -> None:
        """Make every rank stop with an error naming `reason` (used when this rank raised)."""


def check_buffer(buf: np.ndarray, what: str, op: ReduceOp | None = None) -> None:
    """Refuse buffers a transport cannot address or reduce correctly, naming the fix."""
    if not isinstance(buf, np.ndarray):
        raise CommunicatorError(f"{what}: expected a host numpy array, got {type(buf).__name__}; "
                                f"tensors go through rumus.distributed, which stages them to host memory")
    if not buf.flags.c_contiguous or not buf.flags.writeable:
        raise CommunicatorError(f"{what}: the buffer must be C-contiguous and writeable "
                                f"(use np.ascontiguousarray and copy the result back)")
    if buf.dtype not in COMM_DTYPES:
        raise CommunicatorError(f"{what}: dtype {buf.dtype} is not supported by communicators; supported: "
                                f"{', '.join(sorted(str(d) for d in COMM_DTYPES))}")
    if op is ReduceOp.AVG and buf.dtype.kind in "iub":
        raise CommunicatorError(f"{what}: ReduceOp.AVG on integer dtype {buf.dtype} would truncate; "
                                f"use ReduceOp.SUM and divide in floating point")
    if op is not None and buf.dtype == np.bool_ and op is ReduceOp.SUM:
        raise CommunicatorError(f"{what}: ReduceOp.SUM on bool is ambiguous; use MAX (any) or MIN (all)")


def check_all_gather(send: np.ndarray, recv: np.ndarray, world_size: int) -> None:
    """The buffers of all_gather, checked the same way by every adapter: recv holds one send per rank."""
    check_buffer(send, "all_gather send")
    check_buffer(recv, "all_gather recv")
    if recv.shape != (world_size, *send.shape) or recv.dtype != send.dtype:
        raise CommunicatorError(f"all_gather: recv must have shape {(world_size, *send.shape)} and "
                                f"dtype {send.dtype}, got {recv.shape} {recv.dtype}")


def check_reduce_scatter(send: np.ndarray, recv: np.ndarray, world_size: int, op: ReduceOp) -> None:
    """The buffers of reduce_scatter, checked the same way by every adapter: send holds one recv per rank."""
    check_buffer(send, "reduce_scatter send", op)
    check_buffer(recv, "reduce_scatter recv", op)
    if send.size != recv.size * world_size or recv.dtype != send.dtype:
        raise CommunicatorError(f"reduce_scatter: send must hold world_size ({world_size}) x recv.size "
                                f"({recv.size}) elements of recv's dtype, got {send.size} {send.dtype}")

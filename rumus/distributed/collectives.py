"""Collectives on rumus tensors of any backend, staged through host memory.

A tensor is read with its backend's `to_numpy` in chunks of `CHUNK_BYTES`; each chunk's collective
is started asynchronously before the next chunk is read, so on a GPU the download of chunk i+1
overlaps the communication of chunk i. Results are written back with `from_numpy` + an in-place copy
into the tensor's storage (no autograd: communication is not differentiated). float16 and bfloat16
travel as float32 (MPI has no half-precision reductions) and are rounded back once at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp, Work

from .._creation import from_host
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from .state import get_communicator

CHUNK_BYTES = 4 << 20


def to_host(t: Tensor) -> np.ndarray:
    """A C-contiguous host copy of `t` in a dtype communicators carry."""
    if t.dtype.is_fixed or t.dtype.is_packed:
        raise CommunicatorError(f"collectives on {t.dtype} tensors are not supported; dequantize first")
    host = np.ascontiguousarray(t.detach().numpy())
    return host.astype(np.float32) if host.dtype == np.float16 else host


def write_back(t: Tensor, host: np.ndarray) -> None:
    """Copy host values into `t`'s storage in place (cast to its dtype)."""
    with no_grad():
        t.detach().copy_(_like(t, np.ascontiguousarray(host.reshape(t.shape))))


class _StagedWork:
    def __init__(self, works: list[Work], finish: Callable[[], None]) -> None:
        self._works, self._finish, self._done = works, finish, False

    def is_completed(self) -> bool:
        return self._done or all(w.is_completed() for w in self._works)

    def wait(self) -> None:
        if self._done:
            return
        for w in self._works:
            w.wait()
        self._finish()
        self._done = True


def _chunks(flat: Tensor) -> list[tuple[int, int]]:
    step = max(1, CHUNK_BYTES // max(1, flat.element_size()))
    return [(a, min(a + step, flat.numel())) for a in range(0, flat.numel(), step)] or [(0, 0)]


def _chunked(t: Tensor, start: Callable[[np.ndarray], Work], async_op: bool) -> Work:
    flat = t.detach().reshape(-1)
    pieces: list[np.ndarray] = []
    works: list[Work] = []
    for a, b in _chunks(flat):
        host = to_host(flat[a:b])
        pieces.append(host)
        works.append(start(host))  # starts before the next chunk is read: overlap

    work = _StagedWork(works, lambda: write_back(t, np.concatenate(pieces)))  # _chunks is never empty
    if not async_op:
        work.wait()
    return work


def all_reduce(t: Tensor, op: ReduceOp = ReduceOp.SUM, comm: Communicator | None = None,
               async_op: bool = False) -> Work:
    """In place: `t` becomes the reduction of every rank's `t`."""
    c = get_communicator(comm)
    return _chunked(t, lambda host: c.all_reduce(host, op, async_op=True), async_op)


def broadcast(t: Tensor, src: int = 0, comm: Communicator | None = None, async_op: bool = False) -> Work:
    """In place: every rank's `t` becomes rank `src`'s."""
    c = get_communicator(comm)
    return _chunked(t, lambda host: c.broadcast(host, src, async_op=True), async_op)


def all_gather(t: Tensor, comm: Communicator | None = None) -> Tensor:
    """A new tensor of shape (world_size, *t.shape): every rank's `t` in rank order."""
    c = get_communicator(comm)
    send = to_host(t)
    recv = np.empty((c.world_size, *send.shape), send.dtype)
    c.all_gather(send, recv)
    return _like(t, recv)


def reduce_scatter(t: Tensor, op: ReduceOp = ReduceOp.SUM, comm: Communicator | None = None) -> Tensor:
    """`t`'s first dim split into world_size equal chunks; rank r gets the reduction of chunk r."""
    c = get_communicator(comm)
    if t.ndim == 0 or t.shape[0] % c.world_size:
        raise CommunicatorError(f"reduce_scatter: the first dim of shape {t.shape} must divide by world_size "
                                f"{c.world_size}")
    send = to_host(t)
    recv = np.empty((t.shape[0] // c.world_size, *t.shape[1:]), send.dtype)
    c.reduce_scatter(send, recv, op)
    return _like(t, recv)


def send(t: Tensor, dst: int, tag: int = 0, comm: Communicator | None = None) -> None:
    get_communicator(comm).send(to_host(t), dst, tag)


def recv(t: Tensor, src: int, tag: int = 0, comm: Communicator | None = None) -> Tensor:
    """Receive into `t` (in place) and return it."""
    host = to_host(t)
    get_communicator(comm).recv(host, src, tag)
    write_back(t, host)
    return t


def barrier(comm: Communicator | None = None) -> None:
    get_communicator(comm).barrier()


def _like(t: Tensor, host: np.ndarray) -> Tensor:
    return from_host(host, t.dtype, t.device)  # rounds float32 back to float16/bfloat16 on the host

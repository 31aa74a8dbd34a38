"""Collectives on rumus tensors of any backend, staged through host memory.

A tensor is read with its backend's `to_numpy` in chunks of `CHUNK_BYTES`; each chunk's collective
is started asynchronously before the next chunk is read, so on a GPU the download of chunk i+1
overlaps the communication of chunk i. Results are written back with `from_numpy` + an in-place copy
into the tensor's storage (no autograd: communication is not differentiated). float16 and bfloat16
travel as float32 (MPI has no half-precision reductions) and are rounded back once at the end.

Before the payload, every collective exchanges a small signature (which collective, dtype, shape, op,
src: 16 int64s in one all_gather), so ranks that pass different dtypes or shapes, or call different
collectives, get a CommunicatorError naming each rank's arguments on every rank - instead of reducing
one rank's int64 bits as another's float32, or MPI's MPI_ERR_TRUNCATE, or chunk counts that disagree
and hang until the timeout.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from rumus_contracts.dtype import PLAIN_DTYPES

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


_SHOWN_DIMS = 8
_SIG_LEN = 7 + _SHOWN_DIMS + 1


def _code(text: str) -> int:
    return zlib.crc32(text.encode())


_DTYPE_NAMES = {_code(str(d)): d.name for d in PLAIN_DTYPES}
_WHAT_NAMES = {_code(w): w for w in ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "send")}
_OP_NAMES = {_code(o.value): o.name for o in ReduceOp}


def _signature(what: str, t: Tensor, op: ReduceOp | None, src: int) -> np.ndarray:
    shape = tuple(int(d) for d in t.shape)
    shown = list(shape[:_SHOWN_DIMS]) + [-1] * (_SHOWN_DIMS - min(len(shape), _SHOWN_DIMS))
    return np.array([_SIG_LEN, _code(what), _code(str(t.dtype)), _code(op.value) if op is not None else -1, src,
                     len(shape), t.numel(), *shown, _code(repr(shape))], dtype=np.int64)


def _describe(row: np.ndarray) -> str:
    what = _WHAT_NAMES.get(int(row[1]), "another collective")
    dtype = _DTYPE_NAMES.get(int(row[2]), "a packed or unknown dtype")
    ndim = int(row[5])
    dims = [int(d) for d in row[7:7 + min(ndim, _SHOWN_DIMS)]]
    shape = "(" + ", ".join(map(str, dims)) + (", ..." if ndim > _SHOWN_DIMS else ",)" if ndim == 1 else ")")
    extra = f" op={_OP_NAMES.get(int(row[3]), '?')}" if int(row[3]) != -1 else ""
    extra += f" src={int(row[4])}" if what == "broadcast" else ""
    return f"{what} {dtype} {shape}{extra}"


def _agree(c: Communicator, what: str, t: Tensor, op: ReduceOp | None = None, src: int = 0) -> None:
    """Raise CommunicatorError on every rank unless all ranks call `what` with the same arguments."""
    if c.world_size == 1:
        return
    sig = _signature(what, t, op, src)
    table = np.empty((c.world_size, _SIG_LEN), np.int64)
    c.all_gather(sig, table)
    if (table == table[0]).all():
        return
    ranks = "; ".join(f"rank {r}: {_describe(row)}" for r, row in enumerate(table))
    raise CommunicatorError(f"{what} on rank {c.rank}: the ranks disagree ({ranks}); every rank must call the "
                            f"same collective with the same dtype and shape")


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
    _agree(c, "all_reduce", t, op)
    return _chunked(t, lambda host: c.all_reduce(host, op, async_op=True), async_op)


def broadcast(t: Tensor, src: int = 0, comm: Communicator | None = None, async_op: bool = False) -> Work:
    """In place: every rank's `t` becomes rank `src`'s."""
    c = get_communicator(comm)
    if not 0 <= src < c.world_size:
        raise CommunicatorError(f"broadcast: src rank {src} outside a group of {c.world_size}")
    _agree(c, "broadcast", t, src=src)
    return _chunked(t, lambda host: c.broadcast(host, src, async_op=True), async_op)


def all_gather(t: Tensor, comm: Communicator | None = None) -> Tensor:
    """A new tensor of shape (world_size, *t.shape): every rank's `t` in rank order."""
    c = get_communicator(comm)
    _agree(c, "all_gather", t)
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
    _agree(c, "reduce_scatter", t, op)
    send = to_host(t)
    recv = np.empty((t.shape[0] // c.world_size, *t.shape[1:]), send.dtype)
    c.reduce_scatter(send, recv, op)
    return _like(t, recv)


def send(t: Tensor, dst: int, tag: int = 0, comm: Communicator | None = None) -> None:
    """Send `t` to rank `dst`: its signature (dtype, shape) first, on the same tag (messages between two ranks
    on one tag arrive in order), so the receiver can refuse a buffer that does not match."""
    c = get_communicator(comm)
    host = to_host(t)
    c.send(_signature("send", t, None, c.rank), dst, tag)
    c.send(host, dst, tag)


def recv(t: Tensor, src: int, tag: int = 0, comm: Communicator | None = None) -> Tensor:
    """Receive into `t` (in place) and return it; CommunicatorError naming both sides when `src` sent a tensor
    of another dtype or shape (the payload is then not read)."""
    c = get_communicator(comm)
    host = to_host(t)
    sig = np.empty(_SIG_LEN, np.int64)
    c.recv(sig, src, tag)
    mine = _signature("send", t, None, src)
    if not np.array_equal(sig, mine):
        raise CommunicatorError(f"recv on rank {c.rank}: rank {src} sent {_describe(sig)[5:]} on tag {tag}, the "
                                f"receive buffer is {_describe(mine)[5:]}; send and recv must use the same dtype "
                                f"and shape")
    c.recv(host, src, tag)
    write_back(t, host)
    return t


def barrier(comm: Communicator | None = None) -> None:
    get_communicator(comm).barrier()


def _like(t: Tensor, host: np.ndarray) -> Tensor:
    return from_host(host, t.dtype, t.device)  # rounds float32 back to float16/bfloat16 on the host

"""Ranks that pass different dtypes / shapes / ops to a collective, or call different collectives, get a
CommunicatorError naming every rank's arguments, on every rank (in-process ranks here; real MPI ranks in the
adversarial class that runs mpi_mismatch_main.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm
import rumus.distributed as dist
from rumus.distributed import CommunicatorError, InProcessCommunicator, spawn


TensorCase = Callable[[int], Any]
CASES: dict[str, TensorCase] = {
    "all_reduce dtype": lambda r: dist.all_reduce(rm.ones(4) if r == 0 else rm.ones(4, dtype=rm.int64)),
    "all_reduce size": lambda r: dist.all_reduce(rm.ones(4 + 3 * r)),
    "all_reduce shape": lambda r: dist.all_reduce(rm.ones(2, 3) if r == 0 else rm.ones(3, 2)),
    "all_reduce op": lambda r: dist.all_reduce(rm.ones(4), op=dist.ReduceOp.SUM if r else dist.ReduceOp.MAX),
    "broadcast dtype": lambda r: dist.broadcast(rm.ones(3) if r == 0 else rm.ones(3, dtype=rm.float16)),
    "broadcast src": lambda r: dist.broadcast(rm.ones(3), src=r),
    "all_gather dtype": lambda r: dist.all_gather(rm.ones(3) if r == 0 else rm.ones(3, dtype=rm.float64)),
    "all_gather shape": lambda r: dist.all_gather(rm.ones(2 + r)),
    "reduce_scatter size": lambda r: dist.reduce_scatter(rm.ones(4 + 2 * r)),
    "different collectives": lambda r: dist.all_reduce(rm.ones(4)) if r == 0 else dist.broadcast(rm.ones(4)),
}


def _every_rank_refuses(call: Callable[[InProcessCommunicator], Any]) -> list[str]:
    def rank(comm: InProcessCommunicator) -> str:
        try:
            call(comm)
        except CommunicatorError as exc:
            return str(exc)
        return "accepted"
    return spawn(rank, 2, timeout_s=30)


@pytest.mark.parametrize("name", sorted(CASES))
def test_disagreeing_tensor_collectives_raise_on_every_in_process_rank(name: str) -> None:
    messages = _every_rank_refuses(lambda comm: CASES[name](comm.rank))
    for r, msg in enumerate(messages):
        assert "the ranks disagree" in msg and "rank 0:" in msg and "rank 1:" in msg, (r, msg)
    # and the group still works afterwards
    assert spawn(lambda c: dist.all_reduce(rm.full((2,), float(c.rank + 1))) and None, 2) == [None, None]


def test_the_message_names_each_ranks_dtype_and_shape() -> None:
    msg = _every_rank_refuses(lambda c: dist.all_reduce(rm.ones(2, 3) if c.rank == 0 else rm.ones(5, dtype=rm.int64)))
    assert "rank 0: all_reduce float32 (2, 3) op=SUM; rank 1: all_reduce int64 (5,) op=SUM" in msg[0]


@pytest.mark.parametrize("what", ["all_reduce", "broadcast", "all_gather", "reduce_scatter"])
def test_the_in_process_communicator_checks_host_buffers_too(what: str) -> None:
    def call(comm: InProcessCommunicator) -> None:
        buf = np.ones(4, np.float32) if comm.rank == 0 else np.ones(4, np.int32)
        if what == "all_reduce":
            comm.all_reduce(buf)
        elif what == "broadcast":
            comm.broadcast(buf)
        elif what == "all_gather":
            comm.all_gather(buf, np.empty((2, 4), buf.dtype))
        else:
            comm.reduce_scatter(buf, np.empty(2, buf.dtype))
    for msg in _every_rank_refuses(call):
        assert "the ranks disagree" in msg and "float32" in msg and "int32" in msg


def test_matching_collectives_are_unchanged() -> None:
    def rank(comm: InProcessCommunicator) -> list[Any]:
        t = rm.full((3,), float(comm.rank + 1))
        dist.all_reduce(t)
        g = dist.all_gather(rm.full((2,), float(comm.rank)))
        s = dist.reduce_scatter(rm.arange(4, dtype=rm.float32))
        return [t.numpy().tolist(), g.numpy().tolist(), s.numpy().tolist()]
    assert spawn(rank, 2) == [[[3.0] * 3, [[0.0, 0.0], [1.0, 1.0]], [0.0, 2.0]],
                              [[3.0] * 3, [[0.0, 0.0], [1.0, 1.0]], [4.0, 6.0]]]


# Real MPI ranks: tests/adversarial/cases_misc.py's class "collectives with disagreeing ranks (mpirun -n 2)"
# runs mpi_mismatch_main.py under `rumus launch -n 2` (once, in test_adversarial_classes.py).


def test_a_recv_whose_buffer_does_not_match_the_send_names_both() -> None:
    def rank(comm: InProcessCommunicator) -> str:
        if comm.rank == 0:
            dist.send(rm.ones(3), dst=1, tag=4)
            dist.send(rm.arange(3, dtype=rm.float32), dst=1, tag=6)
            return "sent"
        try:
            dist.recv(rm.zeros(3, dtype=rm.int64), src=0, tag=4)
        except CommunicatorError as exc:
            return str(exc) + " | " + str(dist.recv(rm.zeros(3), src=0, tag=6).numpy().tolist())
        return "accepted"
    said = spawn(rank, 2)[1]
    assert "rank 0 sent float32 (3,) on tag 4, the receive buffer is int64 (3,)" in said
    assert said.endswith("| [0.0, 1.0, 2.0]")  # another tag is unaffected

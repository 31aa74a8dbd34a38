"""Which Communicator `rumus.distributed` uses when none is passed: the calling thread's (in-process
ranks are threads), else the process's (an MPI rank)."""

from __future__ import annotations

import threading

from rumus_contracts.communicator import Communicator, CommunicatorError

_local = threading.local()
_process: list[Communicator] = []


def set_thread_communicator(comm: Communicator | None) -> None:
    _local.comm = comm


def set_process_communicator(comm: Communicator | None) -> None:
    _process.clear()
    if comm is not None:
        _process.append(comm)


def current_communicator() -> Communicator | None:
    comm: Communicator | None = getattr(_local, "comm", None)
    return comm if comm is not None else (_process[0] if _process else None)


def get_communicator(comm: Communicator | None = None) -> Communicator:
    """`comm` if given, else the default one; raises when there is none."""
    found = comm if comm is not None else current_communicator()
    if found is None:
        raise CommunicatorError("no communicator: call rumus.distributed.init_mpi() in a script started with "
                                "`rumus launch -n N script.py`, run ranks with rumus.distributed.spawn(...), "
                                "or pass comm= explicitly")
    return found

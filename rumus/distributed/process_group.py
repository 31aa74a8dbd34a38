"""torch.distributed's process-group names over RUMUS's communicators: init_process_group /
destroy_process_group / is_initialized, and the collectives in torch's argument forms (all_gather into a
list, reduce_scatter from a list, group= and async_op=).

Any backend name ("mpi", "gloo", "nccl") runs on MPI when the process is an MPI rank (`rumus launch -n N`,
which also sets torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT);
a single process (WORLD_SIZE unset or 1) gets a one-rank group, so scripts written for torchrun also run
unlaunched. Several processes started another way (torchrun's TCP rendezvous) are refused with the command
that works instead."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp, Work

from ..tensor import Tensor
from . import collectives as C
from .inprocess import InProcessCommunicator, InProcessGroup
from .state import current_communicator, set_process_communicator

_initialized: dict[str, Any] = {}


def is_available() -> bool:
    """True: RUMUS's distributed package is always there (MPI comes with `pip install .[dist]`)."""
    return True


def is_initialized() -> bool:
    return bool(_initialized)


def is_mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def _under_mpi() -> bool:
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: timedelta | None = None, world_size: int = -1, rank: int = -1, store: Any = None,
                       group_name: str = "", pg_options: Any = None, device_id: Any = None) -> None:
    """torch's entry point: a process group for this process, on MPI when launched by `rumus launch`."""
    if _initialized:
        raise RuntimeError("trying to initialize the default process group twice!")
    timeout_s = timeout.total_seconds() if timeout is not None else None
    if _under_mpi() or backend == "mpi":
        from . import init_mpi
        comm: Communicator = init_mpi(timeout_s)
    else:
        env_world = int(os.environ.get("WORLD_SIZE", "1"))
        size = world_size if world_size > 0 else env_world
        if size != 1:
            raise CommunicatorError(
                f"init_process_group(backend={backend!r}): {size} processes outside MPI; RUMUS's processes meet "
                f"through MPI: start the script with `rumus launch -n {size} script.py` (it sets RANK, WORLD_SIZE "
                f"and LOCAL_RANK as torchrun does)")
        comm = InProcessCommunicator(InProcessGroup(1), 0)
        set_process_communicator(comm)
    _initialized.update(backend=backend or "mpi", comm=comm)


def destroy_process_group(group: Any = None) -> None:
    """Release the default process group (a later init_process_group starts a new one)."""
    _initialized.clear()
    if not _under_mpi():
        set_process_communicator(None)


def get_backend(group: Any = None) -> str:
    _require()
    return str(_initialized.get("backend", "mpi"))


def _require() -> Communicator:
    comm = current_communicator()
    if comm is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "init_process_group.")
    return comm


def get_rank(group: Any = None) -> int:
    return _require().rank


def get_world_size(group: Any = None) -> int:
    return _require().world_size


class _Done:
    """The Work of a collective that already finished (async_op=True on a synchronous path)."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Work:
    """In place on every rank; returns the collective's Work (already finished unless async_op)."""
    return C.all_reduce(tensor, op, _comm(group), async_op=async_op)


def broadcast(tensor: Tensor, src: int = 0, group: Any = None, async_op: bool = False) -> Work:
    return C.broadcast(tensor, src, _comm(group), async_op=async_op)


def all_gather(tensor_list: Any, tensor: Tensor | None = None, group: Any = None, async_op: bool = False) -> Any:
    """torch's form all_gather(tensor_list, tensor) fills the list with each rank's tensor; RUMUS's form
    all_gather(tensor) returns them stacked along dim 0."""
    if isinstance(tensor_list, Tensor):  # RUMUS's form, the communicator maybe given second
        return C.all_gather(tensor_list, tensor if isinstance(tensor, Communicator) else _comm(group))
    if not isinstance(tensor, Tensor):
        raise CommunicatorError("all_gather(tensor_list, tensor): tensor must be a Tensor")
    stacked = C.all_gather(tensor, _comm(group))
    parts = stacked.reshape(len(tensor_list), *tensor.shape)
    for out, part in zip(tensor_list, [parts[i] for i in range(len(tensor_list))]):
        out.copy_(part)
    return _Done() if async_op else None


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Any:
    output_tensor.copy_(C.all_gather(input_tensor, _comm(group)).reshape(*output_tensor.shape))
    return _Done() if async_op else None


def reduce_scatter(output: Tensor, input_list: Any = ReduceOp.SUM, op: ReduceOp = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Any:
    """torch's form reduce_scatter(output, input_list, op) writes this rank's reduced share into output;
    RUMUS's form reduce_scatter(tensor, op) returns it."""
    if not isinstance(input_list, (list, tuple)):  # RUMUS's form reduce_scatter(tensor, op, comm)
        comm = op if isinstance(op, Communicator) else _comm(group)
        return C.reduce_scatter(output, input_list if isinstance(input_list, ReduceOp) else ReduceOp.SUM, comm)
    from .._math import cat
    output.copy_(C.reduce_scatter(cat([t.reshape(-1) for t in input_list]), op, _comm(group)).reshape(*output.shape))
    return _Done() if async_op else None


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
    C.barrier(_comm(group))
    return _Done() if async_op else None


def _comm(group: Any) -> Communicator | None:
    if group is None or isinstance(group, Communicator):
        return group
    raise CommunicatorError("process subgroups (new_group) are not supported; use the default group (group=None)")


def new_group(ranks: Sequence[int] | None = None, timeout: Any = None, backend: Any = None,
              pg_options: Any = None) -> Any:
    comm = _require()
    if ranks is None or sorted(ranks) == list(range(comm.world_size)):
        return None  # the default group
    raise CommunicatorError("new_group: process subgroups are not supported; use the default group")


class group:  # noqa: N801  (torch's name)
    WORLD = None


__all__ = [
    "all_gather", "all_gather_into_tensor", "all_reduce", "barrier", "broadcast", "destroy_process_group",
    "get_backend", "group", "init_process_group", "is_available", "is_gloo_available", "is_initialized",
    "is_mpi_available", "is_nccl_available", "new_group", "reduce_scatter",
]

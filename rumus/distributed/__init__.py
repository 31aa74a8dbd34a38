"""Distributed training over the Communicator port (rumus_contracts.communicator): MPI across
processes and hosts (`rumus launch -n N script.py`), or several in-process ranks (`spawn`)."""

from __future__ import annotations

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp, Work

from .collectives import recv, send
from .ddp import DistributedDataParallel
from .fsdp import FullyShardedDataParallel
from .inprocess import InProcessCommunicator, InProcessGroup, spawn
from .pipeline import PipelineStage, one_f_one_b
from .process_group import (
    all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast, destroy_process_group, get_backend, group,
    init_process_group, is_available, is_gloo_available, is_initialized, is_mpi_available, is_nccl_available,
    new_group, reduce_scatter,
)
from .sampler import DistributedSampler
from .state import current_communicator, get_communicator, set_process_communicator
from .tensor_parallel import ColumnParallelLinear, ParallelSelfAttention, RowParallelLinear, VocabParallelEmbedding


def init_mpi(timeout_s: float | None = None) -> Communicator:
    """This MPI rank's communicator (COMM_WORLD), made the process default; an uncaught exception
    on this rank then aborts every rank. Idempotent."""
    from .mpi import DEFAULT_TIMEOUT_S, MPICommunicator, install_abort_on_error

    existing = current_communicator()
    if isinstance(existing, MPICommunicator):  # `rumus launch` already made it; the script may re-time it
        if timeout_s is not None:
            existing.timeout_s = float(timeout_s)
        return existing
    comm = MPICommunicator(timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
    set_process_communicator(comm)
    install_abort_on_error(comm)
    return comm


def get_rank(group: object = None) -> int:
    return get_communicator().rank


def get_world_size(group: object = None) -> int:
    return get_communicator().world_size


__all__ = [
    "ColumnParallelLinear", "Communicator", "CommunicatorError", "DistributedDataParallel", "DistributedSampler",
    "FullyShardedDataParallel", "InProcessCommunicator", "InProcessGroup", "ParallelSelfAttention", "PipelineStage",
    "ReduceOp",
    "RowParallelLinear", "VocabParallelEmbedding", "Work", "all_gather", "all_reduce", "barrier", "broadcast",
    "get_communicator", "get_rank", "get_world_size", "init_mpi", "one_f_one_b", "recv", "reduce_scatter", "send",
    "spawn", "all_gather_into_tensor", "destroy_process_group", "get_backend", "group", "init_process_group",
    "is_available", "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available", "new_group",
]

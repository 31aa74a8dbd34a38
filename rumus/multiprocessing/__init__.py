"""torch.multiprocessing: the standard library's multiprocessing, with tensors that move between processes
through shared memory when they are shared (`Tensor.share_memory_()`, `Module.share_memory()`), so Hogwild
training works with fork and spawn alike; other tensors are sent by value. `spawn(fn, args, nprocs)` runs
fn(rank, *args) in nprocs processes and re-raises a child's exception in the parent."""

from __future__ import annotations

import multiprocessing as _mp
import traceback
from collections.abc import Callable
from multiprocessing import (  # noqa: F401  (torch.multiprocessing re-exports the standard names)
    Array, Barrier, Condition, Event, JoinableQueue, Lock, Manager, Pipe, Pool, Process, Queue, RLock, Semaphore,
    SimpleQueue, Value, active_children, cpu_count, current_process, get_all_start_methods, get_context,
    get_start_method, set_start_method,
)
from multiprocessing.reduction import ForkingPickler
from typing import Any

from .._shared_memory import reduce_shared
from ..nn.parameter import Buffer, Parameter
from ..tensor import Tensor

for _cls in (Tensor, Parameter, Buffer):  # ForkingPickler dispatches on the exact type
    ForkingPickler.register(_cls, reduce_shared)


class ProcessRaisedException(Exception):
    """A process started by spawn() raised; the message holds its traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int | None) -> None:
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(ProcessRaisedException):
    """A process started by spawn() exited with a non-zero status (or a signal)."""

    def __init__(self, msg: str, error_index: int, error_pid: int | None, exit_code: int | None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code


def _wrap(fn: Callable[..., Any], rank: int, args: tuple[Any, ...], errors: Any) -> None:
    try:
        fn(rank, *args)
    except KeyboardInterrupt:
        pass
    except BaseException:
        errors.put((rank, traceback.format_exc()))
        raise SystemExit(1) from None


class ProcessContext:
    def __init__(self, processes: list[Any], errors: Any) -> None:
        self.processes, self._errors = processes, errors

    def pids(self) -> list[int | None]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        for p in self.processes:
            p.join(timeout)
        if any(p.is_alive() for p in self.processes):
            return False
        if not self._errors.empty():
            rank, tb = self._errors.get()
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
            raise ProcessRaisedException(f"\n\n-- Process {rank} terminated with the following error:\n{tb}", rank,
                                         self.processes[rank].pid)
        for i, p in enumerate(self.processes):
            if p.exitcode:
                raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid,
                                             p.exitcode)
        return True


def start_processes(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    ctx: Any = _mp.get_context(start_method)
    errors = ctx.SimpleQueue()
    procs = []
    for rank in range(nprocs):
        p = ctx.Process(target=_wrap, args=(fn, rank, tuple(args), errors), daemon=daemon)
        p.start()
        procs.append(p)
    context = ProcessContext(procs, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """Run fn(rank, *args) for rank in range(nprocs), each in a new process (torch.multiprocessing.spawn)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


def get_sharing_strategy() -> str:
    return "file_system"


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted for torch's 'file_descriptor' / 'file_system': RUMUS shares through named segments."""


def get_all_sharing_strategies() -> set[str]:
    return {"file_system"}

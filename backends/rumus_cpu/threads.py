"""How many threads the C kernels use: RUMUS_NUM_THREADS, else every core this process may run on --
except on machines with 2 or fewer cores, where the default is 1.

Measured on a 2-vCPU machine (benchmarks/RESULTS.md): a 4M-element add gains 2x from 2 threads when the
machine is idle, but an MLP training step (BLAS GEMMs between the kernels) went from 4 ms to 65 ms with 2
threads, because every OpenMP barrier waits for a vCPU that BLAS or another process holds. Two vCPUs are
often one physical core; one thread is the safe default there.
"""

from __future__ import annotations

import os
import warnings


def default_num_threads() -> int:
    env = os.environ.get("RUMUS_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
            if n >= 1:
                return n
        except ValueError:
            pass
        warnings.warn(f"RUMUS_NUM_THREADS={env!r} is not a positive integer; using all cores",
                      RuntimeWarning, stacklevel=2)
    try:
        cores = max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores if cores > 2 else 1


def set_num_threads(n: int) -> None:
    """Threads for kernels large enough to split (numpy's BLAS keeps its own setting)."""
    from ._lib import lib
    lib.rumus_set_num_threads(max(int(n), 1))


def get_num_threads() -> int:
    from ._lib import lib
    return int(lib.rumus_get_num_threads())


def has_openmp() -> bool:
    from ._lib import lib
    return bool(lib.rumus_has_openmp())

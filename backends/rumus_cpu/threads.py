"""How many threads the C kernels use: RUMUS_NUM_THREADS, else every core this process may run on."""

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
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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

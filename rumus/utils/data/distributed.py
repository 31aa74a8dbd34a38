"""torch.utils.data.distributed's path: DistributedSampler (rumus.distributed's). Bound on first use:
rumus.distributed imports rumus.nn, which imports this package while it loads."""

from typing import Any

__all__ = ["DistributedSampler"]  # noqa: F822  (bound by __getattr__)


def __getattr__(name: str) -> Any:
    if name == "DistributedSampler":
        from ...distributed.sampler import DistributedSampler  # late binding: see the module docstring
        return DistributedSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

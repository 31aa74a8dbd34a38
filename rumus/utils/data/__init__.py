"""torch.utils.data's path to the data engine (which lives in rumus.data): `from rumus.utils.data import
DataLoader, Dataset`, and torch's submodules `dataset`, `dataloader`, `sampler`, `distributed`."""

from typing import Any

from ...data import *  # noqa: F401, F403
from ...data import __all__ as _data_all
from . import dataloader, dataset, distributed, sampler  # noqa: F401

__all__ = [*_data_all, "DistributedSampler", "dataloader", "dataset", "distributed", "sampler"]  # noqa: F405


def __getattr__(name: str) -> Any:
    if name == "DistributedSampler":
        return distributed.DistributedSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

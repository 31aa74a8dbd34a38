"""torch.nn.parallel's path: DistributedDataParallel (rumus.distributed's, over the Communicator port) and
DataParallel, which on RUMUS runs its module on the module's own device: RUMUS drives one device per
process, so splitting a batch across devices is DistributedDataParallel's job (`rumus launch -n N`)."""

from __future__ import annotations

from typing import Any

from ...distributed.ddp import DistributedDataParallel
from ..module import Module


class DataParallel(Module):
    """torch.nn.DataParallel's interface: `.module` holds the wrapped module (state_dict keys gain the
    `module.` prefix, as torch's do) and forward runs it unchanged. `device_ids`, `output_device` and
    `dim` are accepted for source compatibility; with RUMUS they select nothing (see the module doc)."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


__all__ = ["DataParallel", "DistributedDataParallel"]

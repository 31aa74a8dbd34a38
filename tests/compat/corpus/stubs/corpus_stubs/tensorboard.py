"""A stand-in for torch.utils.tensorboard: records add_scalar calls (the harness reads losses from them)."""

from __future__ import annotations

from typing import Any

import numpy as np

SCALARS: dict[str, list[tuple[int, float]]] = {}


class SummaryWriter:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def add_scalar(self, tag: str, value: Any, step: int | None = None, *args: Any, **kwargs: Any) -> None:
        if hasattr(value, "detach"):  # a tensor of either framework
            value = value.detach().reshape(-1)[0].item()
        SCALARS.setdefault(tag, []).append((int(step or 0), float(np.asarray(value).reshape(-1)[0])))

    def add_text(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

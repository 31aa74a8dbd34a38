"""torch.cuda.amp's path: `GradScaler()` and `autocast()` for the "cuda" device type. RUMUS has no CUDA
device, so both behave as on torch's CPU build: the scaler is disabled with a warning (scale() returns the
loss unchanged, step() runs the optimizer's step, update() does nothing) and autocast("cuda") warns and
does nothing. Mixed precision on RUMUS's GPU is `rumus.amp.GradScaler("wgpu")` with
`rumus.autocast("wgpu")`."""

from __future__ import annotations

import warnings
from typing import Any

from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast


class GradScaler(_GradScaler):
    """torch.cuda.amp.GradScaler: disabled here, with torch's warning, since CUDA is not available."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled=False)


class autocast(_autocast):  # noqa: N801  (torch's name)
    """torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True): autocast("cuda", ...)."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        super().__init__("cuda", dtype=dtype, enabled=enabled)


__all__ = ["GradScaler", "autocast"]

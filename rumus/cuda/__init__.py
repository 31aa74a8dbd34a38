"""torch.cuda's path for programs written against CUDA. RUMUS has no CUDA backend, so the queries answer
as torch's CPU build does (`is_available()` is False, `device_count()` 0) and send such programs down
their CPU branch; calls that need a CUDA device raise BackendUnavailable naming what to use instead.
`rumus.cuda.amp` holds torch.cuda.amp's GradScaler and autocast, disabled with a warning as torch's CPU
build disables them."""

from __future__ import annotations

from typing import Any

from rumus_contracts import BackendUnavailable

from . import amp


def _no_cuda(*args: Any, **kwargs: Any) -> Any:
    raise BackendUnavailable("CUDA is not a RUMUS backend: check rumus.cuda.is_available() (False) and use "
                             "'cpu' or 'wgpu' (RUMUS_BACKEND picks the default device)")


def is_available() -> bool:
    """False: RUMUS has no CUDA backend (its GPU backend is 'wgpu')."""
    return False


def device_count() -> int:
    """0 CUDA devices."""
    return 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False, as on a machine without CUDA."""
    return False


def manual_seed(seed: int) -> None:
    """Accepted (nothing to seed: no CUDA generator)."""


def manual_seed_all(seed: int) -> None:
    """Accepted (nothing to seed: no CUDA generator)."""


def synchronize(device: Any = None) -> None:
    """Nothing to wait for on CUDA; `rumus.synchronize()` waits for RUMUS's own devices."""


def empty_cache() -> None:
    """Nothing cached on CUDA."""


def is_initialized() -> bool:
    """False: CUDA is never initialised."""
    return False


current_device = get_device_name = set_device = get_device_properties = get_device_capability = _no_cuda
memory_allocated = max_memory_allocated = memory_reserved = _no_cuda

__all__ = [
    "amp", "current_device", "device_count", "empty_cache", "get_device_capability", "get_device_name",
    "get_device_properties", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "memory_allocated", "memory_reserved", "set_device", "synchronize",
]

"""The process-wide plugin state: registries, backends, the default device, cached kernel lookups."""

from __future__ import annotations

import os
import threading
from typing import Any

from rumus_contracts import (
    Backend, BackendUnavailable, ChooseByShape, Device, DType, Kernel, KernelNotFound, LoadedPlugins, hookimpl,
    load_plugins,
)
from rumus_contracts.ops import register_core_ops


class CorePlugin:
    """The core's own op schemas, registered through the same hook as any plugin's."""

    @hookimpl
    def rumus_register_ops(self, registry: Any) -> None:
        register_core_ops(registry)


CORE_PLUGIN = "rumus-core"
_lock = threading.Lock()
_loaded: LoadedPlugins | None = None
_default_device: Device | None = None
_kernel_cache: dict[tuple[str, str, DType], Kernel] = {}


def plugins() -> LoadedPlugins:
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = load_plugins([(CORE_PLUGIN, CorePlugin())])
    return _loaded


def backend(name: str) -> Backend:
    return plugins().backends.get(name)


def kernel(op: str, backend_obj: Backend, dtype: DType) -> Kernel:
    """Cached (op, backend, dtype) -> kernel, as the backend adapted it (GPU backends compile shader
    kernels here, once)."""
    key = (op, backend_obj.name, dtype)
    hit = _kernel_cache.get(key)
    if hit is not None:
        return hit
    entries = plugins().kernels.candidates(op, backend_obj.name, dtype)
    if not entries:
        raise KernelNotFound(op, backend_obj.name, dtype, plugins().kernels.backends_for(op, dtype))
    found = backend_obj.adapt_kernel(entries[-1].kernel)
    if entries[0].applies is not None:  # conditional kernels in front: chosen per call by shape
        fallback = found if entries[-1].applies is None else None
        found = ChooseByShape(op, backend_obj.name, dtype, [(e.applies, backend_obj.adapt_kernel(e.kernel))
                                                            for e in entries if e.applies is not None], fallback)
    _kernel_cache[key] = found
    return found


def default_device() -> Device:
    """RUMUS_BACKEND (e.g. "cpu", "wgpu", "wgpu:1") or cpu; an unknown name lists the installed ones."""
    global _default_device
    if _default_device is None:
        spec = os.environ.get("RUMUS_BACKEND", "").strip() or "cpu"
        dev = Device.parse(spec)
        be = backend(dev.backend)
        devices = be.devices()
        if not any(d.index == dev.index for d in devices):
            raise BackendUnavailable(f"RUMUS_BACKEND={spec}: backend '{dev.backend}' has devices "
                                     f"{[str(d) for d in devices]}")
        _default_device = dev
    return _default_device


def set_default_device(spec: str | Device | None) -> None:
    """Set the device new tensors go to when none is named (a string, a Device, or None for RUMUS_BACKEND's)."""
    global _default_device
    _default_device = None if spec is None else Device.parse(spec)
    if _default_device is not None:
        backend(_default_device.backend)

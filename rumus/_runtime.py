"""The process-wide plugin state: registries, backends, the default device, cached kernel lookups."""

from __future__ import annotations

import threading
from typing import Any

from rumus_contracts import (
    Backend, BackendUnavailable, ChooseByShape, Device, DType, Kernel, KernelNotFound, LoadedPlugins, RumusError,
    config, hookimpl, load_plugins,
)
from rumus_contracts.ops import register_core_ops


class CorePlugin:
    """The core's own op schemas, registered through the same hook as any plugin's."""

    @hookimpl
    def rumus_register_ops(self, registry: Any) -> None:
        register_core_ops(registry)


CORE_PLUGIN = "rumus-core"
# Re-entrant: a plugin's import or hook that asks for the plugins (backend_api.op_schema, plugins) while
# they load gets the registries as loaded so far, from the same thread, instead of waiting on itself.
_lock = threading.RLock()
_loaded: LoadedPlugins | None = None
_loading: LoadedPlugins | None = None  # the partly loaded registries while load_plugins runs
_LOAD_WAIT_S = 300.0  # another thread waits this long for a load in progress, then gets an error
_default_device: Device | None = None
_kernel_cache: dict[tuple[str, str, DType], Kernel] = {}


def plugins() -> LoadedPlugins:
    """The process's plugins, loaded on first use. Asked again from inside the load (a plugin's import
    or hook, same thread), it returns the registries as loaded so far: the core's ops and whatever the
    plugins before have registered."""
    global _loaded, _loading
    if _loaded is not None:
        return _loaded
    if not _lock.acquire(timeout=_LOAD_WAIT_S):
        raise RumusError(f"the plugins did not finish loading within {_LOAD_WAIT_S:.0f} s (a plugin's import or "
                         f"hook waits on another thread that uses rumus?); RUMUS_DISABLE_PLUGIN_AUTOLOAD=1 "
                         f"loads only the built-in backends, `rumus info` names the plugins")
    try:
        if _loaded is not None:
            return _loaded
        if _loading is not None:  # re-entered from a plugin while it loads
            return _loading

        def started(partial: LoadedPlugins) -> None:
            global _loading
            _loading = partial

        try:
            _loaded = load_plugins([(CORE_PLUGIN, CorePlugin())], started=started)
        finally:
            _loading = None
        return _loaded
    finally:
        _lock.release()


def _ready(what: str) -> LoadedPlugins:
    """The loaded plugins, for what runs ops: refused while they load (a kernel chosen from half the
    registrations could be displaced by a later plugin's, and the choice is cached)."""
    loaded = plugins()
    if _loaded is None:
        raise RumusError(f"{what} while the plugins are still loading (called from a plugin's import or "
                         f"registration hook); registration hooks may read op schemas "
                         f"(backend_api.op_schema) but cannot run ops or start backends: do that in the "
                         f"kernel or backend factory, which run after loading")
    return loaded


def backend(name: str) -> Backend:
    loaded = _loaded if _loaded is not None else _ready(f"backend '{name}' was requested")
    return loaded.backends.get(name)


def kernel(op: str, backend_obj: Backend, dtype: DType) -> Kernel:
    """Cached (op, backend, dtype) -> kernel, as the backend adapted it (GPU backends compile shader
    kernels here, once)."""
    key = (op, backend_obj.name, dtype)
    hit = _kernel_cache.get(key)
    if hit is not None:
        return hit
    kernels = _ready(f"a kernel for op '{op}' was requested").kernels
    entries = kernels.candidates(op, backend_obj.name, dtype)
    if not entries:
        raise KernelNotFound(op, backend_obj.name, dtype, kernels.backends_for(op, dtype))
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
        spec = config.text("RUMUS_BACKEND")
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

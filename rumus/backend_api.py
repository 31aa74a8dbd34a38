"""The public backend API: everything of the core that plugins, backends' tests and the conformance
suite may use. Names here are stable; the core's `rumus._*` modules are not, and import-linter keeps
the conformance suite and the example plugins off them.

    from rumus import backend_api as api
    api.backend("wgpu").capabilities(api.default_device())   # a started backend
    api.plugins().kernels.find_entry("add", "cpu", rm.float32)  # who provides a kernel
    t = api.from_storage(np.zeros(4, np.int16), rm.fixed_i16(8))  # a tensor over raw storage

Tensors, dtypes and devices themselves are the user API (`rumus.Tensor`, `rumus.float32`, ...);
the ports (OpSchema, Backend, TensorArg, registries, hooks) live in `rumus_contracts`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from rumus_contracts import Backend, Candidate, Device, DType, Kernel, LoadedPlugins, OpSchema, load_plugins

from . import _dispatch, _runtime
from ._creation import from_storage as _from_storage
from .tensor import Tensor

__all__ = [
    "Candidate", "LoadedPlugins", "backend", "default_device", "from_storage", "kernel", "load_fresh",
    "op_schema", "plugins", "set_default_device", "trace_dispatch",
]


def plugins() -> LoadedPlugins:
    """This process's plugins, loaded on first use: the op, kernel and backend registries, the plugin
    names in load order, and `failures` / `problems` / `all_failures()` for what did not load."""
    return _runtime.plugins()


def backend(name: str) -> Backend:
    """The started backend `name` ("cpu", "wgpu", a plugin's); BackendUnavailable lists the installed ones."""
    return _runtime.backend(name)


def op_schema(name: str) -> OpSchema:
    """The registered schema of op `name` (the core's or a plugin's)."""
    return _runtime.plugins().ops.get(name)


def kernel(op: str, backend_obj: Backend, dtype: DType) -> Kernel:
    """The kernel the dispatcher runs for (op, backend, dtype), after `Backend.adapt_kernel`; the
    highest-priority registration wins. Raises KernelNotFound naming the backends that have one."""
    return _runtime.kernel(op, backend_obj, dtype)


def default_device() -> Device:
    """The device tensors are created on when none is given (RUMUS_BACKEND, else cpu)."""
    return _runtime.default_device()


def set_default_device(spec: str | Device | None) -> None:
    """Change the default device ("wgpu:0", a Device, or None to re-read RUMUS_BACKEND)."""
    _runtime.set_default_device(spec)


def from_storage(host: np.ndarray, dtype: DType, device: Device | str | None = None) -> Tensor:
    """A contiguous tensor whose storage holds exactly `host`, already laid out as `dtype.numpy`
    (raw storage: packed dtypes and fixed-point raw int16 values included; no value conversion)."""
    return _from_storage(host, dtype, device)


def load_fresh(extra: Sequence[Candidate] = ()) -> LoadedPlugins:
    """An independent load of every installed plugin, core first, then `extra` third-party candidates
    (`Candidate(name, "module:attr" or object, builtin=False)`), with the same containment and
    validation as the process's own load, which stays untouched. For testing a plugin before
    installing it: `load_fresh([Candidate("mine", "my_pkg.plugin", False)]).failures`."""
    return load_plugins([(_runtime.CORE_PLUGIN, _runtime.CorePlugin())], extra=list(extra))


@contextmanager
def trace_dispatch() -> Iterator[list[tuple[str, str, str]]]:
    """Record every dispatch inside the block as (op name, backend name, route), route one of "kernel"
    (a backend's kernel ran), "composite" (the core's composite ran) or "decomposition" (the backend has
    no kernel for that (op, dtype), so the core's decomposition ran). Nested ops of a composite or a
    decomposition are recorded too, after their parent. Not thread-safe: for tests and the conformance
    suite, which run one op at a time."""
    previous = _dispatch._route_log
    log: list[tuple[str, str, str]] = []
    _dispatch._route_log = log
    try:
        yield log
    finally:
        _dispatch._route_log = previous

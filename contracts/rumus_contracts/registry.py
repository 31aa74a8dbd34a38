"""Registries that plugins fill: kernels per (op, backend, dtype), and backend factories."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .backend import Backend, Kernel
from .dtype import DType
from .errors import BackendUnavailable, KernelNotFound


@dataclass
class KernelEntry:
    kernel: Kernel
    dtypes: frozenset[DType] | None  # None: every dtype the op schema allows
    owner: str


class KernelRegistry:
    """Kernels by (op, backend). Later registrations win, so a plugin can replace a built-in kernel."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[KernelEntry]] = {}
        self._cache: dict[tuple[str, str, DType], Kernel] = {}

    def register(self, op: str, backend: str, kernel: Kernel, dtypes: Iterable[DType] | None = None,
                 owner: str = "rumus") -> None:
        entry = KernelEntry(kernel, frozenset(dtypes) if dtypes is not None else None, owner)
        self._entries.setdefault((op, backend), []).insert(0, entry)
        self._cache.clear()

    def find(self, op: str, backend: str, dtype: DType) -> Kernel | None:
        key = (op, backend, dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        for entry in self._entries.get((op, backend), ()):
            if entry.dtypes is None or dtype in entry.dtypes:
                self._cache[key] = entry.kernel
                return entry.kernel
        return None

    def lookup(self, op: str, backend: str, dtype: DType) -> Kernel:
        kernel = self.find(op, backend, dtype)
        if kernel is None:
            raise KernelNotFound(op, backend, dtype, self.backends_for(op, dtype))
        return kernel

    def backends_for(self, op: str, dtype: DType | None = None) -> list[str]:
        return sorted({b for (o, b), entries in self._entries.items() if o == op and any(
            dtype is None or e.dtypes is None or dtype in e.dtypes for e in entries)})

    def ops_for(self, backend: str) -> list[str]:
        return sorted({o for (o, b) in self._entries if b == backend})

    def entries(self, op: str, backend: str) -> list[KernelEntry]:
        return list(self._entries.get((op, backend), ()))


class BackendRegistry:
    """Backend factories by name; a backend is created on first use, and a failure is remembered."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[[], Backend]] = {}
        self._instances: dict[str, Backend] = {}
        self._failures: dict[str, str] = {}
        self.owner: dict[str, str] = {}

    def register(self, name: str, factory: Callable[[], Backend], owner: str = "rumus") -> None:
        self._factories[name] = factory
        self.owner[name] = owner

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> Backend:
        inst = self._instances.get(name)
        if inst is not None:
            return inst
        if name not in self._factories:
            raise BackendUnavailable(f"unknown backend '{name}'; installed backends: "
                                     f"{', '.join(self.names()) or 'none'}")
        if name in self._failures:
            raise BackendUnavailable(f"backend '{name}' is unavailable: {self._failures[name]}")
        try:
            inst = self._factories[name]()
        except BackendUnavailable as exc:
            self._failures[name] = str(exc)
            raise BackendUnavailable(f"backend '{name}' is unavailable: {exc}") from None
        except Exception as exc:  # a broken backend must not take the process down
            self._failures[name] = f"{type(exc).__name__}: {exc}"
            raise BackendUnavailable(f"backend '{name}' failed to start: {self._failures[name]}") from exc
        self._instances[name] = inst
        return inst

    def status(self, name: str) -> str:
        """'ok', or the reason the backend cannot start (tries to start it)."""
        try:
            self.get(name)
            return "ok"
        except BackendUnavailable as exc:
            return str(exc)

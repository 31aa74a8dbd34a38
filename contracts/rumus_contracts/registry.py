"""Registries that plugins fill: kernels per (op, backend, dtype), and backend factories.

Every registration carries its owner (the plugin's name), stamped by the loader: a plugin cannot
register on behalf of another one, and a plugin that fails to load is removed again (`drop_owner`),
so it leaves nothing half-registered behind.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .backend import Backend, Kernel, ShaderKernel
from .dtype import DType
from .errors import BackendUnavailable, KernelNotFound, PluginError
from .tensor_arg import TensorArg

if TYPE_CHECKING:
    from .schema import SampleGen

# applies(input shapes, attrs) -> bool: whether a conditional kernel takes this call (see KernelRegistry)
Applies = Callable[[Sequence[tuple[int, ...]], Mapping[str, Any]], bool]

DEFAULT_OWNER = "rumus"


class _Owned:
    """The owner stamp shared by the registries: set by the loader while one plugin's hook runs."""

    def __init__(self) -> None:
        self._loading: str | None = None

    @contextmanager
    def loading(self, owner: str) -> Iterator[None]:
        """Registrations inside the block belong to `owner` (the plugin loader's use only)."""
        previous, self._loading = self._loading, owner
        try:
            yield
        finally:
            self._loading = previous

    def _owner(self, given: str | None) -> str:
        if self._loading is None:
            return given or DEFAULT_OWNER
        if given is not None and given != self._loading:
            raise PluginError(f"plugin '{self._loading}' tried to register as '{given}'; a plugin registers "
                              f"only under its own name (leave out owner=)")
        return self._loading


@dataclass(frozen=True)
class KernelEntry:
    kernel: Kernel
    # None: every plain dtype of the op's schema that the backend holds (its capabilities().dtypes);
    # packed dtypes (q8, int4, fixed_i16), whose word layout a kernel must know, only when named
    dtypes: frozenset[DType] | None
    owner: str
    priority: int = 0  # higher wins; built-in backends register at 0
    # a conditional kernel: runs only for calls whose input shapes and attrs it accepts, otherwise the
    # next registration down (usually the built-in backend's) runs; None = every call
    applies: Applies | None = None
    # extra conformance samples that `applies` accepts (the op's own samples may all be declined)
    samples: SampleGen | None = None


def check_kernel(kernel: object) -> None:
    """Refuse what the dispatcher could never call: kernel(outputs, inputs, attrs) -> None, or a ShaderKernel."""
    if isinstance(kernel, ShaderKernel):
        if not (isinstance(kernel.source, str) and isinstance(kernel.entry_point, str)
                and callable(kernel.workgroups) and (kernel.params is None or callable(kernel.params))):
            raise PluginError("a ShaderKernel needs source and entry_point strings, a workgroups function and "
                              "params = a function or None")
        return
    if not callable(kernel):
        raise PluginError(f"a kernel must be callable as kernel(outputs, inputs, attrs), got {type(kernel).__name__}")
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return  # builtins and C functions without a signature: trusted as written
    try:
        sig.bind(None, None, None)
    except TypeError:
        raise PluginError(f"kernel {getattr(kernel, '__qualname__', kernel)!r} has signature {sig}; kernels are "
                          f"called as kernel(outputs, inputs, attrs)") from None


class KernelRegistry(_Owned):
    """Kernels by (op, backend), each for a set of dtypes, with an explicit priority.

    For each (op, backend, dtype) the entry with the highest `priority` wins. Built-in backends
    register at priority 0; a plugin replaces one of their kernels only by asking for a higher
    priority explicitly. Two owners claiming the same (op, backend, dtype) at the same priority is
    refused, naming both, so which kernel runs never depends on load order. Within one owner a later
    registration replaces an earlier one.

    A kernel registered with `applies` is conditional: it is a faster kernel for some shapes only
    (e.g. a direct depthwise convolution). The dispatcher asks the candidates from the highest
    priority down and runs the first whose `applies(input shapes, attrs)` accepts the call, falling
    back to the first unconditional one (`ChooseByShape`). A conditional kernel needs priority >= 1
    (it never displaces the built-in kernel, it sits in front of it), and should bring `samples` that
    it accepts, so the conformance suite checks it against the op's reference.
    """

    def __init__(self) -> None:
        super().__init__()
        self._entries: dict[tuple[str, str], list[KernelEntry]] = {}
        self._cache: dict[tuple[str, str, DType], Kernel] = {}
        self.problems: dict[str, list[str]] = {}  # owner -> parts that failed to load (see report_failure)

    def register(self, op: str, backend: str, kernel: Kernel, dtypes: Iterable[DType] | None = None,
                 owner: str | None = None, priority: int = 0, applies: Applies | None = None,
                 samples: SampleGen | None = None) -> None:
        who = self._owner(owner)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise PluginError(f"kernel '{op}' on '{backend}': priority must be an int, got {priority!r}")
        check_kernel(kernel)
        if applies is not None and (not callable(applies) or priority < 1):
            raise PluginError(f"kernel '{op}' on '{backend}': a conditional kernel needs applies = a function "
                              f"(input shapes, attrs) -> bool and priority >= 1, got {applies!r}, {priority}")
        if samples is not None and not callable(samples):
            raise PluginError(f"kernel '{op}' on '{backend}': samples must be a function rng -> samples")
        entry = KernelEntry(kernel, frozenset(dtypes) if dtypes is not None else None, who, priority, applies,
                            samples)
        entries = self._entries.setdefault((op, backend), [])
        for other in entries:
            if other.owner != who and other.priority == priority and _overlap(other.dtypes, entry.dtypes):
                raise PluginError(
                    f"kernel for op '{op}' on backend '{backend}' is registered by both '{other.owner}' and "
                    f"'{who}' at priority {priority}; to replace the existing kernel register it with a "
                    f"higher priority (priority={priority + 1}), otherwise drop one registration")
        # newest first among equal priorities: stable sort keeps insertion order
        entries.insert(0, entry)
        entries.sort(key=lambda e: -e.priority)
        self._cache.clear()

    def report_failure(self, what: str, error: BaseException | str) -> None:
        """For a plugin whose kernels partly failed to load (e.g. one kernel module did not import): the
        plugin keeps what did load, and the failure is reported (`rumus info`, and the conformance run
        fails). Call it instead of warning and carrying on silently."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.problems.setdefault(self._owner(None), []).append(f"{what}: {text}")

    def drop_owner(self, owner: str) -> None:
        """Remove every kernel and problem report of `owner` (a plugin that failed to load)."""
        for key in list(self._entries):
            kept = [e for e in self._entries[key] if e.owner != owner]
            if kept:
                self._entries[key] = kept
            else:
                del self._entries[key]
        self.problems.pop(owner, None)
        self._cache.clear()

    def find(self, op: str, backend: str, dtype: DType) -> Kernel | None:
        key = (op, backend, dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        entry = self.find_entry(op, backend, dtype)
        if entry is None:
            return None
        self._cache[key] = entry.kernel
        return entry.kernel

    def find_entry(self, op: str, backend: str, dtype: DType) -> KernelEntry | None:
        """The winning registration for (op, backend, dtype), with its owner and priority."""
        for entry in self._entries.get((op, backend), ()):
            if _covers(entry, dtype):
                return entry
        return None

    def claiming_entry(self, op: str, backend: str, dtype: DType, held: Collection[DType]) -> KernelEntry | None:
        """The winning registration that claims (op, dtype) on a backend holding the dtypes `held`: a
        registration with dtypes=None claims only the dtypes the backend holds (what the conformance suite
        holds it to), one that names its dtypes claims each of them."""
        entry = self.find_entry(op, backend, dtype)
        if entry is None or entry.dtypes is None and dtype not in held:
            return None
        return entry

    def candidates(self, op: str, backend: str, dtype: DType) -> list[KernelEntry]:
        """The registrations the dispatcher may run for (op, backend, dtype), best first: the conditional
        ones above the first unconditional one, and that one (the fallback), if any."""
        out = []
        for entry in self._entries.get((op, backend), ()):
            if _covers(entry, dtype):
                out.append(entry)
                if entry.applies is None:
                    break
        return out

    def lookup(self, op: str, backend: str, dtype: DType) -> Kernel:
        kernel = self.find(op, backend, dtype)
        if kernel is None:
            raise KernelNotFound(op, backend, dtype, self.backends_for(op, dtype))
        return kernel

    def backends_for(self, op: str, dtype: DType | None = None) -> list[str]:
        return sorted({b for (o, b), entries in self._entries.items() if o == op and any(
            dtype is None or _covers(e, dtype) for e in entries)})

    def ops_for(self, backend: str) -> list[str]:
        return sorted({o for (o, b) in self._entries if b == backend})

    def entries(self, op: str, backend: str) -> list[KernelEntry]:
        return list(self._entries.get((op, backend), ()))

    def owned_by(self, owner: str) -> list[tuple[str, str, KernelEntry]]:
        """(op, backend, entry) of every kernel `owner` registered."""
        return [(op, be, e) for (op, be), entries in self._entries.items() for e in entries if e.owner == owner]


class ChooseByShape:
    """The kernel the dispatcher runs when conditional kernels sit in front of a fallback: per call, the
    first kernel whose predicate accepts the input shapes and attrs. Kernels arrive already adapted by
    the backend. Without a fallback, a call no predicate accepts raises KernelNotFound."""

    def __init__(self, op: str, backend: str, dtype: DType, choices: Sequence[tuple[Applies, Kernel]],
                 fallback: Kernel | None) -> None:
        self.op, self.backend, self.dtype = op, backend, dtype
        self.choices, self.fallback = tuple(choices), fallback

    def pick(self, inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> Kernel:
        shapes = [a.shape for a in inputs]
        for applies, kernel in self.choices:
            if applies(shapes, attrs):
                return kernel
        if self.fallback is None:
            raise KernelNotFound(self.op, self.backend, self.dtype, [])
        return self.fallback

    def __call__(self, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        self.pick(inputs, attrs)(outputs, inputs, attrs)


def _covers(entry: KernelEntry, dtype: DType) -> bool:
    """Whether `entry` may run for `dtype`: one it names, or any plain dtype for dtypes=None (a plain dtype
    the backend does not hold never reaches its kernels)."""
    return dtype in entry.dtypes if entry.dtypes is not None else not dtype.is_packed


def _overlap(a: frozenset[DType] | None, b: frozenset[DType] | None) -> bool:
    return a is None or b is None or bool(a & b)


class BackendRegistry(_Owned):
    """Backend factories by name; a backend is created on first use, and a failure is remembered.

    A name belongs to the first plugin that registers it: the built-in backends load first, so a
    plugin cannot displace them. The created object must satisfy the `Backend` protocol.
    """

    def __init__(self) -> None:
        super().__init__()
        self._factories: dict[str, Callable[[], Backend]] = {}
        self._instances: dict[str, Backend] = {}
        self._failures: dict[str, str] = {}
        self.owner: dict[str, str] = {}

    def register(self, name: str, factory: Callable[[], Backend], owner: str | None = None) -> None:
        who = self._owner(owner)
        if not callable(factory):
            raise PluginError(f"backend '{name}': the factory must be callable, got {type(factory).__name__}")
        if name in self._factories and self.owner[name] != who:
            raise PluginError(f"backend '{name}' is registered by both '{self.owner[name]}' and '{who}'; "
                              f"the first one keeps the name, pick another name for the second")
        self._factories[name] = factory
        self.owner[name] = who

    def drop_owner(self, owner: str) -> None:
        for name in [n for n, o in self.owner.items() if o == owner]:
            del self._factories[name], self.owner[name]
            self._instances.pop(name, None)
            self._failures.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> Backend:
        inst = self._instances.get(name)
        if inst is not None:
            return inst
        if name not in self._factories:
            hint = ", ".join(self.names()) or ("none (backends are found through the entry-point group 'rumus': "
                                               "`pip install -e .` in a source checkout registers the built-in ones)")
            raise BackendUnavailable(f"unknown backend '{name}'; installed backends: {hint}")
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
        if not isinstance(inst, Backend):
            missing = [m for m in _BACKEND_MEMBERS if not hasattr(inst, m)]
            self._failures[name] = (f"the factory of plugin '{self.owner[name]}' returned a "
                                    f"{type(inst).__name__}, which lacks {missing} of the Backend protocol")
            raise BackendUnavailable(f"backend '{name}' failed to start: {self._failures[name]}")
        self._instances[name] = inst
        return inst

    def status(self, name: str) -> str:
        """'ok', or the reason the backend cannot start (tries to start it)."""
        try:
            self.get(name)
            return "ok"
        except BackendUnavailable as exc:
            return str(exc)


_BACKEND_MEMBERS = ("name", "devices", "allocate", "from_numpy", "to_numpy", "copy_", "synchronize",
                    "capabilities", "adapt_kernel")

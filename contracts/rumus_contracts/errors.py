"""One error hierarchy for every user mistake; each message says what went wrong and what to do."""

from __future__ import annotations


class RumusError(Exception):
    """Base class of every error RUMUS raises on bad input."""


class BackendUnavailable(RumusError):
    """A backend was asked for but is not installed or cannot start on this machine."""


class KernelNotFound(RumusError):
    """No kernel for (op, backend, dtype); the message lists the backends that do have one."""

    def __init__(self, op: str, backend: str, dtype: object, available: list[str] | None = None) -> None:
        self.op, self.backend, self.dtype = op, backend, dtype
        self.available = sorted(available or [])
        where = f"; backends with a kernel for it: {', '.join(self.available)}" if self.available else ""
        super().__init__(
            f"op '{op}' has no kernel on backend '{backend}' for dtype {dtype}{where}. "
            f"Move the tensors with .to(...) or install a plugin that provides it."
        )


class DeviceMismatch(RumusError):
    """Inputs of one op live on different devices."""


class ShapeError(RumusError):
    """Shapes that do not fit the op (the message names the op and the shapes)."""


class DTypeError(RumusError):
    """A dtype the op or backend does not accept, or two dtypes that cannot meet."""


class AutogradError(RumusError):
    """Autograd misuse: backward twice, a saved tensor modified in place, no graph, ..."""


class FormatError(RumusError):
    """A malformed or corrupt file (the message names the problem and where)."""


class PluginError(RumusError):
    """A plugin registered something inconsistent (duplicate op, kernel for an unknown op, ...)."""

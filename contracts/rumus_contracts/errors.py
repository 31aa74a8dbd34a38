"""One error hierarchy for every user mistake; each message says what went wrong and what to do.

Every class also derives from the built-in exception PyTorch raises in the same situation, so code
written for PyTorch (`except RuntimeError`, `except IndexError`, `except FileNotFoundError`, ...)
catches ours; `RumusError` stays the common base for code written for RUMUS.

    RumusError ............ Exception
    BackendUnavailable .... RuntimeError        (torch: RuntimeError "... not available")
    KernelNotFound ........ NotImplementedError (torch: NotImplementedError "Could not run ... backend")
    DeviceMismatch ........ RuntimeError        (torch: "Expected all tensors to be on the same device")
    ShapeError ............ RuntimeError, ValueError (torch: RuntimeError for sizes; F.* often ValueError)
      IndexOutOfRange ..... IndexError          (torch: IndexError "index 5 is out of bounds")
    DTypeError ............ TypeError, RuntimeError (torch: TypeError for arguments, RuntimeError in ops)
    ArgumentTypeError ..... TypeError           (torch: zeros(1.5) -> TypeError)
    AutogradError ......... RuntimeError        (torch: backward twice, version counter)
    FormatError ........... ValueError          (a malformed file; json/pickle raise ValueError kinds)
    FileError ............. OSError             (a file that cannot be read or written)
      MissingFile ......... FileNotFoundError
    OutOfMemory ........... MemoryError, RuntimeError (torch.OutOfMemoryError is a RuntimeError)
    PluginError ........... RuntimeError
"""

from __future__ import annotations


class RumusError(Exception):
    """Base class of every error RUMUS raises on bad input."""


class BackendUnavailable(RumusError, RuntimeError):
    """A backend was asked for but is not installed or cannot start on this machine."""


class KernelNotFound(RumusError, NotImplementedError):
    """No kernel for (op, backend, dtype); the message lists the backends that do have one."""

    def __init__(self, op: str, backend: str, dtype: object, available: list[str] | None = None) -> None:
        self.op, self.backend, self.dtype = op, backend, dtype
        self.available = sorted(available or [])
        where = f"; backends with a kernel for it: {', '.join(self.available)}" if self.available else ""
        super().__init__(
            f"op '{op}' has no kernel on backend '{backend}' for dtype {dtype}{where}. "
            f"Move the tensors with .to(...) or install a plugin that provides it."
        )


class DeviceMismatch(RumusError, RuntimeError):
    """Inputs of one op live on different devices."""


class ShapeError(RumusError, RuntimeError, ValueError):
    """Shapes that do not fit the op (the message names the op and the shapes)."""


class IndexOutOfRange(ShapeError, IndexError):
    """An index (or class id) outside the valid range of its dim; the message names both."""


class DTypeError(RumusError, TypeError, RuntimeError):
    """A dtype the op or backend does not accept, or two dtypes that cannot meet."""


class ArgumentTypeError(RumusError, TypeError):
    """An argument of the wrong Python type (a float or a string where a size is expected, ...)."""


class AutogradError(RumusError, RuntimeError):
    """Autograd misuse: backward twice, a saved tensor modified in place, no graph, ..."""


class FormatError(RumusError, ValueError):
    """A malformed or corrupt file (the message names the problem and where)."""


class PluginError(RumusError, RuntimeError):
    """A plugin registered something inconsistent (duplicate op, kernel for an unknown op, ...)."""


class FileError(RumusError, OSError):
    """A file that cannot be read or written (permissions, a directory, a full disk, ...)."""

    def __str__(self) -> str:  # OSError's str() shows errno tuples; ours is the message we built
        return str(self.args[0]) if self.args else ""


class MissingFile(FileError, FileNotFoundError):
    """A file that does not exist (the message names the path)."""


class OutOfMemory(RumusError, MemoryError, RuntimeError):
    """An allocation the machine cannot satisfy; the message names the shape, dtype and bytes asked for."""

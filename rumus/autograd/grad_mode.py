"""Grad mode switches: no_grad / enable_grad / inference_mode / set_grad_enabled.

The mode is per thread (PyTorch's rule): a `no_grad` block in one thread never stops another thread
from recording its graph, and interleaved blocks in two threads each restore their own previous mode.
`state` is a `threading.local`, so every thread starts with grad mode enabled.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    # threading.local runs __init__ once in each thread that touches `state`: each starts enabled
    def __init__(self) -> None:
        self.enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    """Whether operations in this thread record the autograd graph."""
    return state.enabled


class set_grad_enabled:
    """Context manager (and decorator) setting grad mode; also works as a plain call.

    The previous mode is remembered when the block is entered, in the entering thread."""

    def __init__(self, mode: bool) -> None:
        self.prev = state.enabled
        self.mode = bool(mode)
        state.enabled = self.mode

    def __enter__(self) -> None:
        state.enabled = self.mode

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        state.enabled = self.prev


class _Mode:
    """Base of the mode blocks. The saved previous modes form a per-thread stack, so one instance
    (a decorator's, or a module-level `no_grad()`) can be entered by several threads at once."""

    mode = False

    def __enter__(self) -> None:
        stack = _saved_modes()
        stack.append(state.enabled)
        state.enabled = self.mode

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        state.enabled = _saved_modes().pop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


class _Saved(threading.local):
    def __init__(self) -> None:
        self.modes: list[bool] = []


_saved = _Saved()


def _saved_modes() -> list[bool]:
    return _saved.modes


class no_grad(_Mode):
    """No graph is recorded inside: results have requires_grad=False and no grad_fn."""

    mode = False


class enable_grad(_Mode):
    """Context manager (and decorator) that turns gradient recording back on inside `no_grad`, as torch.enable_grad."""
    mode = True


class inference_mode(_Mode):
    """Like no_grad (RUMUS records nothing in either; no graph node is ever allocated)."""

    mode = False

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode

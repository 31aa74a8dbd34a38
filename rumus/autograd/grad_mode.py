"""Grad mode switches: no_grad / enable_grad / inference_mode / set_grad_enabled."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradState:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


state = _GradState()


def is_grad_enabled() -> bool:
    return state.enabled


class set_grad_enabled:
    """Context manager (and decorator) setting grad mode; also works as a plain call."""

    def __init__(self, mode: bool) -> None:
        self.prev = state.enabled
        self.mode = bool(mode)
        state.enabled = self.mode

    def __enter__(self) -> None:
        state.enabled = self.mode

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        state.enabled = self.prev


class _Mode:
    mode = False

    def __enter__(self) -> None:
        self.prev = state.enabled
        state.enabled = self.mode

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        state.enabled = self.prev

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


class no_grad(_Mode):
    """No graph is recorded inside: results have requires_grad=False and no grad_fn."""

    mode = False


class enable_grad(_Mode):
    mode = True


class inference_mode(_Mode):
    """Like no_grad (RUMUS records nothing in either; no graph node is ever allocated)."""

    mode = False

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode

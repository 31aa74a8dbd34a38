"""`host_region`: marks Python bookkeeping that a compiled function must re-run on every replay.

A replay runs only captured kernels, so Python state a step advances (an optimizer's step count, a
scheduler's learning rate, gradients set to None) would freeze. Methods decorated here run eagerly
inside a replay instead of being captured; their own kernels (one fused update per parameter) are
dispatched as usual. Outside a capture the decorator costs one global read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def host_region(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .. import _dispatch
        recorder = _dispatch._capture
        if recorder is None:
            return fn(*args, **kwargs)
        return recorder.host_call(fn, args, kwargs)
    return wrapper  # type: ignore[return-value]

"""Per-thread state that is not grad mode: the autocast settings (grad mode lives in
autograd.grad_mode, RNG streams in rumus.random). One `threading.local`, so a block entered in one
thread never changes what another thread computes.

Autocast itself is not implemented yet; this is where its context manager keeps its state:

    from rumus._thread_state import autocast_state
    prev = autocast_state.push(True, "float16")
    try: ...
    finally: autocast_state.restore(prev)
"""

from __future__ import annotations

import threading


class AutocastState(threading.local):
    """Whether autocast is on in this thread and to which lower-precision dtype (a dtype name)."""

    def __init__(self) -> None:
        self.enabled = False
        self.dtype: str | None = None

    def push(self, enabled: bool, dtype: str | None) -> tuple[bool, str | None]:
        """Set the state; returns the previous one for `restore`."""
        prev = (self.enabled, self.dtype)
        self.enabled, self.dtype = bool(enabled), dtype
        return prev

    def restore(self, prev: tuple[bool, str | None]) -> None:
        self.enabled, self.dtype = prev


autocast_state = AutocastState()

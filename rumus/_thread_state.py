"""Per-thread state that is not grad mode: the autocast settings (grad mode lives in
autograd.grad_mode, RNG streams in rumus.random). One `threading.local`, so a block entered in one
thread never changes what another thread computes.

`rumus.autocast` (rumus/amp/autocast.py) keeps its state here:

    from rumus._thread_state import autocast_state
    prev = autocast_state.push(True, "float16")
    try: ...
    finally: autocast_state.restore(prev)
"""

from __future__ import annotations

import threading
from typing import Any

AutocastSaved = tuple[bool, str | None, str | None, bool]


class AutocastState(threading.local):
    """Whether autocast is on in this thread, to which lower-precision dtype (a dtype name), for which
    device type (a backend name; None: every device), and the weight-cast cache of the current region.

    The cache maps id(parameter) -> (parameter, its version, grad mode, dtype name, the cast copy); it
    lives as long as the outermost enabled autocast block (PyTorch's rule), so a parameter used by
    several layers in one forward is cast once, and a parameter changed in place is cast again."""

    def __init__(self) -> None:
        self.enabled = False
        self.dtype: str | None = None
        self.device_type: str | None = None
        self.cache_enabled = True
        self.depth = 0  # nesting depth of enabled autocast blocks: the cache is cleared when it drops to 0
        self.cache: dict[tuple[int, str], tuple[Any, ...]] = {}
        # ops an autocast class applied to, with a tensor on the block's device type and with none there:
        # a block whose ops all ran elsewhere cast nothing, and says so when it ends
        self.ops_on_device = 0
        self.ops_elsewhere = 0

    def push(self, enabled: bool, dtype: str | None, device_type: str | None = None,
             cache_enabled: bool = True) -> AutocastSaved:
        """Set the state; returns the previous one for `restore`."""
        prev = (self.enabled, self.dtype, self.device_type, self.cache_enabled)
        self.enabled, self.dtype = bool(enabled), dtype
        self.device_type, self.cache_enabled = device_type, bool(cache_enabled)
        self.depth += 1
        return prev

    def restore(self, prev: AutocastSaved | tuple[bool, str | None]) -> None:
        full = (*prev, None, True) if len(prev) == 2 else prev
        self.enabled, self.dtype, self.device_type, self.cache_enabled = full
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 or not self.enabled:
            self.cache.clear()


autocast_state = AutocastState()

"""Replaying a captured kernel from the launches it made, without running its Python again.

A backend may offer ``record_launches(device)`` (optional, like ``compile_fused``): a tape that notes
what a kernel call launched (on WebGPU: pipelines, buffers, uniform bytes, workgroup counts) and
``freeze(slot_of)`` turns it into a function issuing the same launches over a later replay's slot
buffers. A replayed kernel then costs its launches only: its wrapper's planning, uniform packing,
scratch allocation and bind-group creation ran once (conv/pool wrappers do a lot of that per call).
The tape is taken at the first replay (after the memory plan has rewritten the steps' buffers);
kernels whose launches change per replay (fresh dropout seeds, optimizer steps in host regions) keep
running their Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rumus_contracts import TensorArg


def taped(backend: Any, device: Any, run: Callable[[], None], bufs: list[Any],
          args: list[TensorArg], patched: set[int]) -> Callable[[list[Any]], None] | None:
    """Run the kernel (`run`) once, noting its launches; the frozen launches, or None where the backend
    has no tape, the kernel read values, or a slot's buffer also stands in one of the step's fixed
    arguments (a later replay could swap one and not the other)."""
    record = getattr(backend, "record_launches", None)
    slot_of = {id(b): i for i, b in enumerate(bufs) if b is not None}
    if record is None or any(id(a.buffer) in slot_of for k, a in enumerate(args) if k not in patched):
        run()
        return None
    tape = record(device)
    with tape:
        run()
    frozen: Callable[[list[Any]], None] | None = tape.freeze(slot_of)
    return frozen

"""Where in the user's code a traced value was made: the first frame outside rumus, for export errors."""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType

import rumus_contracts

import rumus

_OURS = tuple(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep for m in (rumus, rumus_contracts))


def is_ours(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(_OURS) or name.startswith("<frozen") or os.sep + "contextlib.py" in name


def user_line(skip: int = 1) -> str:
    """'file:line (`code`)' of the innermost caller outside rumus (the model's forward, usually)."""
    frame: FrameType | None = sys._getframe(skip + 1)
    while frame is not None and is_ours(frame):
        frame = frame.f_back
    return "an unknown place" if frame is None else describe(frame)


def caller_is_user(skip: int = 1) -> str | None:
    """describe() of the immediate caller when it is the user's code (not rumus calling int() on a size)."""
    frame = sys._getframe(skip + 1)
    return None if is_ours(frame) else describe(frame)


def describe(frame: FrameType) -> str:
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return f"{where} (`{code}`)" if code else where

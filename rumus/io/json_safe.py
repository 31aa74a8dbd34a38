"""The one hardened JSON loader every RUMUS file format goes through (fixtures, checkpoint sidecars,
safetensors headers, and ONNX/checkpoint metadata as they arrive).

Python's `json` trusts its input: nesting 1000 deep raises RecursionError, a 5000-digit integer raises
a bare ValueError (CPython's int-string limit), duplicate keys silently keep the last value, and NaN /
Infinity are accepted although they are not JSON. Here every one of those is bounded up front and every
failure is a FormatError that says what was wrong, where, and which limit applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rumus_contracts import FormatError


@dataclass(frozen=True)
class JsonLimits:
    """Bounds on a JSON document; generous for real files, small enough that nothing explodes."""

    max_bytes: int = 256 << 20
    max_depth: int = 64
    max_int_digits: int = 40
    allow_floats: bool = True


DEFAULT_LIMITS = JsonLimits()

# A JSON string literal (escapes included); removed before counting brackets so "[[[" inside a string
# does not count as nesting.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def nesting_depth(data: bytes) -> int:
    """The deepest [ / { nesting of a JSON text (strings ignored), computed without recursion."""
    skeleton = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    if skeleton.size == 0:
        return 0
    steps = np.zeros(skeleton.shape, dtype=np.int64)
    steps[(skeleton == ord("[")) | (skeleton == ord("{"))] = 1
    steps[(skeleton == ord("]")) | (skeleton == ord("}"))] = -1
    return int(np.cumsum(steps).max(initial=0))


def _no_duplicates(what: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise FormatError(f"{what}: {key}: the key appears twice in one object")
            out[key] = value
        return out
    return build


def loads(data: str | bytes, what: str, limits: JsonLimits = DEFAULT_LIMITS) -> Any:
    """Parse JSON text under `limits`; FormatError (prefixed with `what`, e.g. the path) on anything else."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > limits.max_bytes:
        raise FormatError(f"{what}: {len(data)} bytes of JSON is more than the limit of {limits.max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    depth = nesting_depth(data)
    if depth > limits.max_depth:
        raise FormatError(f"{what}: JSON nested {depth} levels deep; the limit is {limits.max_depth}")

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > limits.max_int_digits:
            raise FormatError(f"{what}: an integer with {len(digits.lstrip('-'))} digits; the limit is "
                              f"{limits.max_int_digits}")
        return int(digits)

    def parse_float(digits: str) -> float:
        if not limits.allow_floats:
            raise FormatError(f"{what}: holds integers only, found the number {digits[:40]}")
        if len(digits) > 400:
            raise FormatError(f"{what}: a number written with {len(digits)} characters; the limit is 400")
        return float(digits)

    def parse_constant(name: str) -> Any:
        kind = "holds integers only, and " if not limits.allow_floats else ""
        raise FormatError(f"{what}: {kind}{name} is not a JSON value (JSON has no NaN or Infinity)")

    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(what), parse_int=parse_int,
                          parse_float=parse_float, parse_constant=parse_constant)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{what}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # unreachable after the depth check; kept so no parser path can crash
        raise FormatError(f"{what}: JSON nested too deeply") from None
    except FormatError:
        raise
    except ValueError as exc:
        raise FormatError(f"{what}: not valid JSON: {exc}") from None


def load(path: str, what: str | None = None, limits: JsonLimits = DEFAULT_LIMITS) -> Any:
    """Read and parse a JSON file under `limits` (see `read_bounded` for the file errors)."""
    return loads(read_bounded(path, limits.max_bytes), what or path, limits)


def read_bounded(path: str, max_bytes: int) -> bytes:
    """A file's bytes; MissingFile / FileError for the OS problems, FormatError when it is too big."""
    from .files import open_for_reading
    with open_for_reading(path) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FormatError(f"{path}: larger than the limit of {max_bytes} bytes for this kind of file")
    return bytes(data)

"""The canonical JSON text of a fixture (SPEC E): byte-stable, so the same fixture is the same bytes.

2-space indent, one `"key": value` per line, integer arrays on one line as `[a, b, c]` (empty `[]`),
objects inside arrays broken over lines, integers only (no floats can appear), `null` for None,
and a final newline after the closing brace. Key order is the dict's insertion order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

INDENT = "  "


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        raise TypeError("fixtures hold no booleans")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    raise TypeError(f"fixtures hold integers, strings, null, lists and objects only; got {type(value).__name__}")


def _value(value: Any, depth: int) -> str:
    if isinstance(value, Mapping):
        return _object(value, depth)
    if isinstance(value, (list, tuple)):
        return _array(value, depth)
    return _scalar(value)


def _array(items: Sequence[Any], depth: int) -> str:
    if not items:
        return "[]"
    if all(not isinstance(v, (Mapping, list, tuple)) for v in items):
        return "[" + ", ".join(_scalar(v) for v in items) + "]"
    pad = INDENT * (depth + 1)
    return "[\n" + ",\n".join(pad + _value(v, depth + 1) for v in items) + "\n" + INDENT * depth + "]"


def _object(obj: Mapping[str, Any], depth: int) -> str:
    if not obj:
        return "{}"
    pad = INDENT * (depth + 1)
    lines = [f"{pad}{json.dumps(str(k))}: {_value(v, depth + 1)}" for k, v in obj.items()]
    return "{\n" + ",\n".join(lines) + "\n" + INDENT * depth + "}"


def dumps(obj: Mapping[str, Any]) -> str:
    """The canonical text of a JSON object, ending with a newline."""
    return _object(obj, 0) + "\n"

"""The hardened JSON loader: every bound is a FormatError naming the limit, never a crash."""

from __future__ import annotations

import pytest

from rumus.io.json_safe import JsonLimits, loads, nesting_depth
from rumus_contracts import FormatError


def test_valid_documents_parse() -> None:
    assert loads(b'{"a": [1, 2, {"b": null}], "c": "x[[["}', "doc") == {"a": [1, 2, {"b": None}], "c": "x[[["}
    assert loads('{"f": 1.5e3}', "doc") == {"f": 1500.0}


@pytest.mark.parametrize("text,depth", [(b"1", 0), (b"[]", 1), (b"[[{}]]", 3), (b'["[[[", {"a": "]]"}]', 2),
                                        (b'"\\"[["', 0)])
def test_nesting_depth_ignores_strings(text: bytes, depth: int) -> None:
    assert nesting_depth(text) == depth


@pytest.mark.parametrize("text,match", [
    (b"[" * 1000 + b"]" * 1000, "nested 1000 levels deep; the limit is 64"),
    (b"[" * 200000, "nested 200000"),
    (b'{"a": ' + b"7" * 4301 + b"}", "4301 digits; the limit is 40"),
    (b'{"a": -' + b"7" * 41 + b"}", "41 digits"),
    (b'{"a": NaN}', "NaN is not a JSON value"),
    (b'{"a": -Infinity}', "-Infinity is not a JSON value"),
    (b'{"a": 1, "a": 2}', "a: the key appears twice"),
    (b'{"a": 1', "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b'{"a": 1.' + b"5" * 500 + b"}", "502 characters; the limit is 400"),
])
def test_hostile_documents_are_format_errors(text: bytes, match: str) -> None:
    with pytest.raises(FormatError, match=match) as info:
        loads(text, "the doc")
    assert str(info.value).startswith("the doc: ")


def test_limits_are_configurable() -> None:
    tight = JsonLimits(max_bytes=10, max_depth=1, max_int_digits=2, allow_floats=False)
    with pytest.raises(FormatError, match="more than the limit of 10"):
        loads(b"[" + b"1," * 10 + b"1]", "d", tight)
    with pytest.raises(FormatError, match="nested 2 levels"):
        loads(b"[[1]]", "d", tight)
    with pytest.raises(FormatError, match="integers only"):
        loads(b"[1.5]", "d", tight)
    assert loads(b"[12]", "d", tight) == [12]

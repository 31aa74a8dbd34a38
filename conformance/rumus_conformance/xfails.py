"""Known gaps of a backend, listed by its maintainer in a file (the array-api-tests model).

The suite itself never softens: a third party that knows its backend lacks something lists it in a
text file passed as `rumus conformance --backend X --xfails FILE` (or RUMUS_CONFORMANCE_XFAILS=FILE);
`rumus conformance --write-xfails FILE` writes the gaps of a run in this format. A listed cell is
expected to fail (xfail); one that passes is reported as XPASS and fails the run, so the list can only
shrink. One cell a line, `#` starts a comment:

    # op              dtype    check
    fixed_requantize  int64    forward        # one check of one op x dtype cell
    fixed_requantize  int64    *              # forward, noncontiguous and gradient of the cell
    fixed_requantize  *        *              # those checks of the op, every dtype
    fixed_requantize  -        errors         # the op's error-input test (dtype "-")

check is forward, noncontiguous, gradient, errors or `*`; a `*` check never covers `errors`, whose test
passes or fails on its own. A line naming one test that is not a cell (e.g. `test_xor_converges`)
covers that test. The older one-token forms still read: `test_forward[op-dtype]` (one check),
`op-dtype` (= `op dtype *`) and `op` (= `op * *`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rumus_contracts import RumusError, config

from .outcomes import CHECKS, NO_DTYPE, CellKey, CellResult

ENV = "RUMUS_CONFORMANCE_XFAILS"
ANY = "*"
_NAME = r"[A-Za-z_][\w.]*"
_DTYPE = r"[\w(),.]+"
_TEST = re.compile(rf"^test_(forward|noncontiguous|gradient|error_inputs)\[({_NAME})(?:-({_DTYPE}))?\]$")
_CELL_DTYPE = re.compile(rf"^(\*|-|{_DTYPE})$")
_OP_DTYPE = re.compile(rf"^({_NAME})-({_DTYPE})$")
_PLAIN_TEST = re.compile(rf"^{_NAME}$")
_TEST_CHECK = {"forward": "forward", "noncontiguous": "noncontiguous", "gradient": "gradient",
               "error_inputs": "errors"}

Pattern = tuple[str, str, str]  # (op, dtype or "*", check or "*")


@dataclass
class XFails:
    path: str = ""
    cells: dict[Pattern, str] = field(default_factory=dict)  # cell pattern -> "file:line"
    tests: dict[str, str] = field(default_factory=dict)  # a plain test's name -> "file:line"
    used: set[str] = field(default_factory=set)  # "file:line" of every entry that matched

    def match(self, key: CellKey) -> str | None:
        """The "file:line" of the entry covering the cell `key` = (op, dtype, check), or None."""
        op, dtype, check = key
        for pattern in ((op, dtype, check), (op, dtype, ANY), (op, ANY, check), (op, ANY, ANY)):
            if pattern[2] == ANY and check == "errors":
                continue  # an op's error inputs are listed only by name
            where = self.cells.get(pattern)
            if where is not None:
                self.used.add(where)
                return where
        return None

    def match_test(self, name: str) -> str | None:
        where = self.tests.get(name)
        if where is not None:
            self.used.add(where)
        return where

    def unused(self) -> list[str]:
        entries = {**{w: " ".join(p) for p, w in self.cells.items()}, **{w: t for t, w in self.tests.items()}}
        return [f"{where}: {entry}" for where, entry in sorted(entries.items()) if where not in self.used]


def parse_line(line: str) -> Pattern | str | None:
    """An entry (comment already stripped) as a cell pattern, a plain test's name, or None if malformed."""
    parts = line.split()
    if len(parts) == 3:
        op, dtype, check = parts
        if re.match(rf"^{_NAME}$", op) and _CELL_DTYPE.match(dtype) and (check in CHECKS or check == ANY) \
                and (check == "errors") == (dtype == NO_DTYPE):
            return op, dtype, check
        return None
    if len(parts) != 1:
        return None
    word = parts[0]
    if m := _TEST.match(word):
        check = _TEST_CHECK[m.group(1)]
        if (check == "errors") != (m.group(3) is None):
            return None
        return m.group(2), m.group(3) or NO_DTYPE, check
    if m := _OP_DTYPE.match(word):
        return m.group(1), m.group(2), ANY
    if _PLAIN_TEST.match(word):
        # a bare name: a test that is not a cell (test_*), else an op's every dtype and value check
        return word if word.startswith("test_") else (word, ANY, ANY)
    return None


def load(path: str | None = None) -> XFails:
    """Read the xfails file named by `path` or $RUMUS_CONFORMANCE_XFAILS; none given: no entries."""
    path = path or config.text(ENV)
    if not path:
        return XFails()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RumusError(f"cannot read the xfails file {path!r}: {exc}") from None
    out = XFails(path)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        entry = parse_line(line)
        if entry is None:
            raise RumusError(f"{path}:{lineno}: {line!r} is not an xfails entry; write a cell as `op dtype check` "
                             f"(check one of {', '.join(CHECKS)} or *, dtype a name or *, and `op - errors` for "
                             f"the op's error inputs)")
        if isinstance(entry, str):
            out.tests[entry] = f"{path}:{lineno}"
        else:
            out.cells[entry] = f"{path}:{lineno}"
    return out


def render(cells: Iterable[CellResult], header: str) -> str:
    """The gaps among `cells` (failing, missing, untested, or listed and still failing) as an xfails
    file, one exact cell a line with what is wrong as its comment."""
    gaps = sorted((c for c in cells if c.is_gap), key=lambda c: (c.op, c.dtype, CHECKS.index(c.check)))
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append("# op dtype check   # outcome: what is wrong")
    width = max((len(c.op) for c in gaps), default=0)
    dw = max((len(c.dtype) for c in gaps), default=0)
    for c in gaps:
        outcome = c.underlying or c.outcome
        why = " ".join(c.summary().split())[:160]
        lines.append(f"{c.op.ljust(width)}  {c.dtype.ljust(dw)}  {c.check.ljust(13)}  # {outcome}: {why}".rstrip())
    return "\n".join(lines) + "\n"

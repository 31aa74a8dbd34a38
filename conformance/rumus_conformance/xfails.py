"""Known gaps of a backend, listed by its maintainer in a file (the array-api-tests model).

The suite itself never softens: a third party that knows its backend lacks something lists it in a
text file passed as `rumus conformance --backend X --xfails FILE` (or RUMUS_CONFORMANCE_XFAILS=FILE).
Listed tests are expected to fail; one that passes is reported as a failure (XPASS strict), so the
list shrinks as the backend grows. One entry a line, `#` starts a comment:

    test_forward[fixed_requantize-int64]   # one test
    fixed_requantize-int64                 # every check of one op x dtype cell
    fixed_requantize                       # every check of one op, all dtypes
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from rumus_contracts import RumusError

ENV = "RUMUS_CONFORMANCE_XFAILS"
_ENTRY = re.compile(r"^[A-Za-z_][\w.]*(\[[^\]\s]+\])?$|^[A-Za-z_]\w*-[\w(),.]+$")


@dataclass
class XFails:
    path: str = ""
    entries: dict[str, str] = field(default_factory=dict)  # entry -> "file:line"
    used: set[str] = field(default_factory=set)

    def match(self, test_name: str) -> str | None:
        """The entry covering `test_name` (e.g. "test_forward[add-float32]"), or None."""
        kind, _, param = test_name.partition("[")
        param = param.rstrip("]")
        op = param.rpartition("-")[0] if "-" in param else param
        for key in (test_name, param, op):
            if key and key in self.entries:
                self.used.add(key)
                return key
        return None

    def unused(self) -> list[str]:
        return [f"{where}: {entry}" for entry, where in self.entries.items() if entry not in self.used]


def load(path: str | None = None) -> XFails:
    """Read the xfails file named by `path` or $RUMUS_CONFORMANCE_XFAILS; none given: no entries."""
    path = path or os.environ.get(ENV, "").strip()
    if not path:
        return XFails()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RumusError(f"cannot read the xfails file {path!r}: {exc}") from None
    entries: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _ENTRY.match(line):
            raise RumusError(f"{path}:{lineno}: {line!r} is not an xfails entry; write a test name "
                             f"(test_forward[op-dtype]), an op x dtype cell (op-dtype) or an op name")
        entries[line] = f"{path}:{lineno}"
    return XFails(path, entries)

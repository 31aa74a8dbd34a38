"""Issue 12's promise: a PyTorch program runs after renaming the import. Each program in programs.py runs
as written under torch, then with only its import lines renamed to rumus; the results must agree."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from .programs import PRELUDE, PROGRAMS

pytest.importorskip("torch")

_RENAMES = [
    (re.compile(r"^import torch$", re.M), "import rumus as torch"),
    (re.compile(r"^import torch\.(\S+) as (\w+)$", re.M), r"import rumus.\1 as \2"),
    (re.compile(r"^from torch(\.\S+)? import ", re.M), r"from rumus\1 import "),
]


def renamed(source: str) -> str:
    """Only the import lines change: `import torch` -> `import rumus as torch`, `torch.x` -> `rumus.x`."""
    for pattern, repl in _RENAMES:
        source = pattern.sub(repl, source)
    return source


def run(source: str) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": "__program__"}
    exec(compile(source, "<program>", "exec"), scope)  # noqa: S102  (our own program text)
    result: dict[str, Any] = scope["result"]
    return result


def assert_same(got: Any, want: Any, path: str = "result") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), path
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{path}: {got} vs {want}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(want, bool) or isinstance(want, str):
        assert got == want, f"{path}: {got!r} vs {want!r}"
    elif isinstance(want, int):
        assert got == want and type(got) is type(want), f"{path}: {got!r} vs {want!r}"
    else:
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4, err_msg=path)


def test_renaming_touches_only_imports() -> None:
    src = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\nx = torch.ones(2)\n"
    assert renamed(src) == ("import rumus as torch\nimport rumus.nn as nn\nfrom rumus.utils.data import DataLoader\n"
                            "x = torch.ones(2)\n")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_unchanged_under_rumus(name: str) -> None:
    source = PRELUDE + PROGRAMS[name]
    want = run(source)
    got = run(renamed(source))
    assert_same(got, want)

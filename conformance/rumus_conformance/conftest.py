"""Strictness, known gaps and the coverage matrix, wired into pytest.

- Tests listed in the xfails file (see xfails.py) are marked xfail(strict=True): an entry that
  passes fails the run, so the list can only shrink.
- A plugin that failed to load, or loaded partly (e.g. a CPU kernel module that did not import, a
  stale C build), fails the session even when `-k` deselected every test that would notice.
- Per-(op, dtype) outcomes are collected and the matrix is printed at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from rumus import backend_api as api

from . import xfails
from .matrix import MATRIX, render

KNOWN_GAPS = xfails.load()
_KINDS = ("test_forward", "test_noncontiguous", "test_gradient")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.nodeid.split("::")[0].replace("\\", "/").endswith(("rumus_conformance/test_ops.py",
                                                                         "rumus_conformance/test_modules.py")):
            continue
        entry = KNOWN_GAPS.match(item.name)
        if entry is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"known gap listed in {KNOWN_GAPS.entries[entry]}"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    name = report.nodeid.split("::")[-1]
    if "[" not in name or not name.startswith(_KINDS):
        return
    kind, _, param = name.partition("[")
    op, _, dtype = param.rstrip("]").rpartition("-")
    outcome: str = report.outcome
    text = str(report.longrepr) if report.longrepr is not None else ""
    if hasattr(report, "wasxfail"):
        outcome = "xfail" if report.outcome == "skipped" else "xpass"
    elif outcome == "failed" and "MISSING:" in text:
        outcome = "missing"
    MATRIX.record(op, dtype, kind, outcome)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if api.plugins().all_failures() and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if MATRIX.cells:
        terminalreporter.write_sep("=", "rumus conformance: op x dtype")
        terminalreporter.write_line(render())
    unused = KNOWN_GAPS.unused() if MATRIX.cells else []
    if unused:
        terminalreporter.write_sep("-", "xfails entries that matched no test (remove them)")
        for line in unused:
            terminalreporter.write_line(line)
    broken = api.plugins().all_failures()
    if broken:
        terminalreporter.write_sep("=", "rumus conformance FAILED: plugins did not load cleanly", red=True)
        for line in broken:
            terminalreporter.write_line(line)

"""Collects per-(op, dtype) outcomes and prints the coverage matrix at the end of the run."""

from __future__ import annotations

from typing import Any

import pytest

from .matrix import MATRIX, render


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    name = report.nodeid.split("::")[-1]
    if "[" not in name or not name.startswith(("test_forward", "test_noncontiguous", "test_gradient")):
        return
    kind, _, param = name.partition("[")
    op, _, dtype = param.rstrip("]").rpartition("-")
    outcome = report.outcome
    if outcome == "skipped":
        longrepr: Any = report.longrepr
        text = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        outcome = "missing" if "MISSING" in text else "skipped"
    MATRIX.record(op, dtype, kind, outcome)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if MATRIX.cells:
        terminalreporter.write_sep("=", "rumus conformance: op x dtype")
        terminalreporter.write_line(render())

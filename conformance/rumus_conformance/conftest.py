"""Strictness, known gaps and the coverage matrix, wired into pytest.

- Each op test judges one cell (op, dtype, check) into a CellResult (cells.py); the report hook adds
  the xfails file's verdict and keeps the result in outcomes.RESULTS, which the matrix, `--json` and
  `--write-xfails` read. Nothing is read back from failure text.
- Cells listed in the xfails file (see xfails.py) are marked xfail(strict=True): an entry that
  passes fails the run (XPASS), so the list can only shrink.
- A plugin that failed to load, or loaded partly (e.g. a CPU kernel module that did not import, a
  stale C build), fails the session even when `-k` deselected every test that would notice.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from rumus import backend_api as api

from . import xfails
from .matrix import render
from .outcomes import FAIL, NO_DTYPE, RESULTS, SKIP, CellKey, CellResult, Mismatch

KNOWN_GAPS = xfails.load()
LISTED: dict[CellKey, str] = {}  # cell -> "file:line" of the xfails entry covering it
_CHECK_OF_TEST = {"test_forward": "forward", "test_noncontiguous": "noncontiguous", "test_gradient": "gradient",
                  "test_error_inputs": "errors"}
_OWN = ("rumus_conformance/test_ops.py", "rumus_conformance/test_modules.py")


def cell_key(item: pytest.Item) -> CellKey | None:
    """The cell an op test judges, from its parameters (None for any other test)."""
    check = _CHECK_OF_TEST.get(getattr(item, "originalname", ""))
    callspec = getattr(item, "callspec", None)
    if check is None or callspec is None or not _ours(item):
        return None
    if check == "errors":
        return (str(callspec.params["op"]), NO_DTYPE, check)
    claim = callspec.params["claim"]
    return (claim.op, claim.dtype.name, check)


def _ours(item: pytest.Item) -> bool:
    return item.path.as_posix().endswith(_OWN)


def pytest_sessionstart(session: pytest.Session) -> None:
    RESULTS.clear()
    LISTED.clear()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not _ours(item):
            continue
        key = cell_key(item)
        where = KNOWN_GAPS.match(key) if key is not None else KNOWN_GAPS.match_test(item.name)
        if where is not None:
            if key is not None:
                LISTED[key] = where
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"known gap listed at {where}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return report
    key = cell_key(item)
    if key is None:
        if _ours(item):
            RESULTS.tests[item.nodeid] = report.outcome
        return report
    cell = RESULTS.take_raw(key)
    if cell is None:  # the test stopped before it judged its cell: what stopped it is the result
        exc = call.excinfo
        if report.skipped:
            cell = CellResult(*key, SKIP, detail=str(exc.value) if exc else "skipped")
        else:
            why = f"{exc.typename}: {exc.value}" if exc else "the test did not judge its cell"
            cell = CellResult(*key, FAIL, worst=Mismatch(why), detail=why)
    where = LISTED.get(key)
    RESULTS.record(cell.listed(where) if where else cell)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if api.plugins().all_failures() and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if RESULTS.cells:
        terminalreporter.write_sep("=", "rumus conformance: op x dtype")
        terminalreporter.write_line(render())
    unused = KNOWN_GAPS.unused() if RESULTS.cells else []
    if unused:
        terminalreporter.write_sep("-", "xfails entries that matched no test (remove them)")
        for line in unused:
            terminalreporter.write_line(line)
    broken = api.plugins().all_failures()
    if broken:
        terminalreporter.write_sep("=", "rumus conformance FAILED: plugins did not load cleanly", red=True)
        for line in broken:
            terminalreporter.write_line(line)

"""`rumus conformance --backend NAME [--xfails FILE] [--json FILE] [--write-xfails FILE]`: run the
suite, print the matrix, exit non-zero on any failure.

Strict by default: a failed check, a kernel a claimed cell needs that is missing (MISSING, naming it),
a registered kernel no sample can exercise (UNTESTED), a plugin that failed to load or loaded partly
(a kernel module that did not import, a stale C build) all fail the run. Known gaps go in an xfails
file (see xfails.py; `--write-xfails` writes the current ones); an xfail that passes fails the run too.
`--json` writes every cell's outcome, worst error, sample and missing primitives (docs/CONFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rumus_contracts import RumusError, config


def _refuse_an_unknown_backend(p: argparse.ArgumentParser, spec: str) -> None:
    """Usage error (exit 2, one line) for a backend no plugin registered. One that is registered but cannot
    start, or loaded partly, is the suite's to report (in its matrix, failing the run)."""
    from rumus.backend_api import plugins
    backends = plugins().backends
    name = spec.strip().split(":")[0]
    if name not in backends.names():
        p.error(f"no backend {spec!r}; the installed ones are {', '.join(backends.names())} (see rumus info)")


def main(argv: list[str] | None = None) -> int:
    import pytest
    p = argparse.ArgumentParser(prog="rumus conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default=config.text("RUMUS_BACKEND"))
    p.add_argument("--xfails", default=None, metavar="FILE",
                   help="known gaps, one cell `op dtype check` a line (array-api-tests model)")
    p.add_argument("--json", default=None, metavar="FILE", help="write every cell's outcome as JSON to FILE")
    p.add_argument("--write-xfails", default=None, metavar="FILE",
                   help="write this run's gaps (failing, missing, untested, still-failing listed cells) to FILE "
                        "in the xfails format")
    p.add_argument("-k", default=None, help="pytest -k expression (e.g. 'matmul')")
    p.add_argument("-q", action="store_true", help="quieter pytest output")
    args = p.parse_args(argv)
    _refuse_an_unknown_backend(p, args.backend)
    os.environ["RUMUS_BACKEND"] = args.backend
    if args.xfails:
        from .xfails import ENV, load
        load(args.xfails)  # a missing or malformed file is refused here, before any test runs
        os.environ[ENV] = os.path.abspath(args.xfails)
    for path in (args.json, args.write_xfails):
        if path and not Path(path).resolve().parent.is_dir():
            raise RumusError(f"cannot write {path!r}: its folder does not exist")
    pytest_args = ["--pyargs", "rumus_conformance", "-p", "no:cacheprovider", "-q" if args.q else "-rf"]
    if args.k:
        pytest_args += ["-k", args.k]
    status = int(pytest.main(pytest_args))
    if args.json:
        Path(args.json).write_text(json.dumps(report(args.backend, status), indent=1) + "\n", encoding="utf-8")
    if args.write_xfails:
        from .outcomes import RESULTS
        from .xfails import render
        header = (f"Known gaps of backend '{args.backend}', written by `rumus conformance --write-xfails` "
                  f"from one run{f' (-k {args.k})' if args.k else ''}.\nEach line is one failing cell; "
                  f"a cell that starts passing fails the run (XPASS): delete its line then.")
        Path(args.write_xfails).write_text(render(RESULTS.cells.values(), header), encoding="utf-8")
    return status


def report(backend: str, status: int) -> dict[str, Any]:
    """The whole run as data: every cell, the counts, the ranked missing primitives, the other tests."""
    from rumus import backend_api as api

    from .outcomes import RESULTS, is_primitive
    cells = sorted(RESULTS.cells.values(), key=lambda c: c.key)
    return {
        "backend": backend,
        "exit_status": status,
        "counts": RESULTS.counts(),
        "missing_primitives": [{"op": prim, "cells": len(where), "unlocks": [f"{op}/{d}" for op, d in where],
                                "primitive": is_primitive(prim)} for prim, where in RESULTS.missing_ranked()],
        "cells": [c.as_json() for c in cells],
        "other_tests": RESULTS.tests,
        "plugin_failures": api.plugins().all_failures(),
    }

"""`rumus conformance --backend NAME [--xfails FILE]`: run the suite, print the matrix, exit non-zero
on any failure.

Strict by default: a failed check, a held dtype without a kernel (MISSING), a registered kernel no
sample can exercise (UNTESTED), a plugin that failed to load or loaded partly (a kernel module that
did not import, a stale C build) all fail the run. Known gaps go in an xfails file (see xfails.py);
an xfail that passes fails the run too.
"""

from __future__ import annotations

import argparse
import os


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
    p.add_argument("--backend", default=os.environ.get("RUMUS_BACKEND", "cpu"))
    p.add_argument("--xfails", default=None, metavar="FILE",
                   help="known gaps, one test / op-dtype / op a line (array-api-tests model)")
    p.add_argument("-k", default=None, help="pytest -k expression (e.g. 'matmul')")
    p.add_argument("-q", action="store_true", help="quieter pytest output")
    args = p.parse_args(argv)
    _refuse_an_unknown_backend(p, args.backend)
    os.environ["RUMUS_BACKEND"] = args.backend
    if args.xfails:
        from .xfails import ENV, load
        load(args.xfails)  # a missing or malformed file is refused here, before any test runs
        os.environ[ENV] = os.path.abspath(args.xfails)
    pytest_args = ["--pyargs", "rumus_conformance", "-p", "no:cacheprovider", "-q" if args.q else "-rf"]
    if args.k:
        pytest_args += ["-k", args.k]
    return int(pytest.main(pytest_args))

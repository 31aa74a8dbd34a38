"""`rumus conformance --backend NAME`: run the suite, print the matrix, exit non-zero on any failure."""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> int:
    import pytest
    p = argparse.ArgumentParser(prog="rumus conformance", description=__doc__)
    p.add_argument("--backend", default=os.environ.get("RUMUS_BACKEND", "cpu"))
    p.add_argument("--strict", action="store_true", help="count missing kernels as failures")
    p.add_argument("-k", default=None, help="pytest -k expression (e.g. 'matmul')")
    p.add_argument("-q", action="store_true", help="quieter pytest output")
    args = p.parse_args(argv)
    os.environ["RUMUS_BACKEND"] = args.backend
    pytest_args = ["--pyargs", "rumus_conformance", "-p", "no:cacheprovider", "-q" if args.q else "-rf"]
    if args.k:
        pytest_args += ["-k", args.k]
    code = int(pytest.main(pytest_args))
    if args.strict and code == 0:
        from .matrix import MATRIX
        if any("missing" in kinds.values() for kinds in MATRIX.cells.values()):
            print("strict: some kernels are missing")
            return 1
    return code

"""`rumus fixed verify FILE...`: exit 0 when every fixture reproduces bit for bit.

Exit codes: 0 all verified; 1 some output differs (the first differing index is printed);
2 a file is unreadable or malformed (the FormatError, naming the field, is printed), or the
arguments are wrong. Every problem is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rumus_contracts import FormatError, RumusError

from .fixture import Fixture, LinearRecord, load_fixture

EXIT_OK, EXIT_MISMATCH, EXIT_MALFORMED = 0, 1, 2


def _describe(fx: Fixture) -> str:
    layers = ", ".join(f"linear {r.in_features}->{r.out_features}{'' if r.bias is not None else ' (no bias)'}"
                       if isinstance(r, LinearRecord) else "relu" for r in fx.layers)
    return (f"{len(fx.layers)} layer{'s' if len(fx.layers) != 1 else ''} [{layers}], scale_log2 {fx.scale_log2}, "
            f"input {list(fx.input_shape)} -> output {list(fx.output_shape)}")


def verify_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rumus fixed verify",
                                     description="Re-run fixed-point fixtures and check their outputs bit for bit.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="fixture JSON file(s)")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help or a usage error: report, do not exit the caller's process
        return int(exc.code) if isinstance(exc.code, int) else EXIT_MALFORMED
    status = EXIT_OK
    for path in args.files:
        try:
            fx = load_fixture(path)
            result = fx.verify()
        except OSError as exc:  # MissingFile / FileError are OSErrors too
            reason = str(exc).removeprefix(f"{path}: ") if isinstance(exc, RumusError) else \
                f"cannot read it: {exc.strerror or exc}"
            print(f"ERROR {path}: {reason}", file=sys.stderr)
            status = max(status, EXIT_MALFORMED)
            continue
        except FormatError as exc:
            text = str(exc).removeprefix(f"{path}: ")  # the path is already at the start of the line
            print(f"ERROR {path}: malformed fixture: FormatError: {text}", file=sys.stderr)
            status = max(status, EXIT_MALFORMED)
            continue
        except (RumusError, MemoryError) as exc:
            print(f"ERROR {path}: cannot run it: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = max(status, EXIT_MALFORMED)
            continue
        if result.ok:
            print(f"OK {path}: {_describe(fx)}; {result.summary()}")
        else:
            print(f"MISMATCH {path}: {result.summary()}")
            status = max(status, EXIT_MISMATCH)
    return status


if __name__ == "__main__":
    sys.exit(verify_main())

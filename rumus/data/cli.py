"""`rumus rrec inspect|verify|convert`: look into, check and build `.rrec` files.

    rumus rrec inspect FILE                   counts, shapes, dtypes, sizes (headers only)
    rumus rrec verify FILE                    full scan; exit 1 with the FormatError message on a defect
    rumus rrec convert IN.npz OUT.rrec        arrays `inputs` and `targets`, first axis = records
                                              [--float16] stores float16
Exit codes: 0 fine, 1 a damaged .rrec file, 2 usage or I/O error or a file that is no .rrec file at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

import numpy as np

from rumus_contracts import FormatError, RumusError

from .rrec_format import HEADER_SIZE, INDEX_ENTRY, MAGIC
from .rrec_reader import BlockLayout, RecordFile
from .rrec_writer import RecordWriter


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rumus rrec", description="Inspect, verify and build .rrec record files.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("inspect", help="counts, shapes, dtypes and sizes").add_argument("file")
    sub.add_parser("verify", help="check every record; non-zero exit on any defect").add_argument("file")
    conv = sub.add_parser("convert", help="build a .rrec file from an .npz with arrays `inputs` and `targets`")
    conv.add_argument("npz")
    conv.add_argument("out")
    conv.add_argument("--float16", action="store_true", help="store inputs and targets as float16")
    return p


def _sig(b: BlockLayout) -> str:
    return f"{list(b.shape)} {b.dtype_name}"


def _refuse_non_rrec(path: str) -> None:
    """A file that does not start with the magic is not a damaged .rrec file but the wrong file: bad input."""
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    if head != MAGIC:
        raise _NotRrec(f"{path} is not a .rrec file (its first bytes, the magic, are {head!r}, not {MAGIC!r}); "
                       f"rumus rrec convert IN.npz OUT.rrec makes one")


class _NotRrec(RumusError):
    pass


def _inspect(path: str) -> int:
    _refuse_non_rrec(path)
    with RecordFile(path) as f:
        n = len(f)
        index_bytes = INDEX_ENTRY.size * n
        print(f"file:      {path}")
        print(f"size:      {f.file_size} bytes (header {HEADER_SIZE}, records {f.index_offset - HEADER_SIZE}, "
              f"index {index_bytes})")
        print(f"records:   {n}")
        inputs: Counter[str] = Counter()
        targets: Counter[str] = Counter()
        lengths: list[int] = []
        defect = None
        for i in range(n):
            try:
                rec = f.layout(i)
            except FormatError as exc:
                defect = str(exc)
                break
            inputs[_sig(rec.input)] += 1
            targets[_sig(rec.target)] += 1
            lengths.append(rec.length)
        for name, sigs in (("inputs", inputs), ("targets", targets)):
            print(f"{name}:")
            for sig, count in sigs.most_common(10):
                print(f"  {count:>10} x {sig}")
            if len(sigs) > 10:
                print(f"  ... and {len(sigs) - 10} more shapes")
        if lengths:
            print(f"record size: min {min(lengths)}, max {max(lengths)}, mean {sum(lengths) / len(lengths):.1f} bytes")
    if defect:
        print(f"DEFECT: {defect}", file=sys.stderr)
        return 1
    return 0


def _verify(path: str) -> int:
    _refuse_non_rrec(path)
    with RecordFile(path) as f:
        n = f.verify()
    print(f"OK: {path}: {n} records, {os.path.getsize(path)} bytes")
    return 0


def _open_npz(npz: str) -> Any:
    """np.load of an .npz, every way it can fail on a file that is not one (empty, not a zip, truncated,
    pickled objects) turned into one RumusError naming the file."""
    import zipfile
    try:
        data = np.load(npz)
    except (EOFError, zipfile.BadZipFile, ValueError, UnicodeDecodeError) as exc:
        raise RumusError(f"{npz} is not a readable .npz file ({type(exc).__name__}: {exc}); write one with "
                         f"numpy.savez(path, inputs=..., targets=...)") from None
    if not hasattr(data, "files"):  # a plain .npy: np.load returned the array itself
        raise RumusError(f"{npz} holds one array, not an .npz archive with arrays `inputs` and `targets`")
    return data


def _convert(npz: str, out: str, float16: bool) -> int:
    with _open_npz(npz) as data:
        missing = [k for k in ("inputs", "targets") if k not in data.files]
        if missing:
            print(f"error: {npz} has no array named {', '.join(missing)} (found: {', '.join(data.files)})",
                  file=sys.stderr)
            return 2
        inputs, targets = data["inputs"], data["targets"]
    if inputs.ndim == 0 or targets.ndim == 0 or len(inputs) != len(targets):
        print(f"error: `inputs` {inputs.shape} and `targets` {targets.shape} need the same first axis "
              f"(one entry per record)", file=sys.stderr)
        return 2
    with RecordWriter(out, float16=float16) as w:
        for x, y in zip(inputs, targets):
            w.append(x, y)
    print(f"wrote {len(inputs)} records to {out} ({os.path.getsize(out)} bytes)")
    return 0


def main(argv: list[str]) -> int:
    """Entry point; `argv` may start with "rrec" (as in `rumus rrec verify FILE`) or with the command."""
    args_in = list(argv)
    if args_in and args_in[0] == "rrec":
        args_in = args_in[1:]
    try:
        args = _parser().parse_args(args_in)
    except SystemExit as exc:  # argparse exits on usage errors; report it as a code
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    try:
        if args.command == "inspect":
            return _inspect(args.file)
        if args.command == "verify":
            return _verify(args.file)
        return _convert(args.npz, args.out, args.float16)
    except FormatError as exc:
        print(f"DEFECT: {exc}", file=sys.stderr)
        return 1
    except (OSError, RumusError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

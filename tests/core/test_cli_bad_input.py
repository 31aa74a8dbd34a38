"""Every `rumus` subcommand answers bad input with exit status 2 and one line on stderr naming the problem
(argparse's usage line before its `error:` line counts as part of that answer): no traceback, no pages of
pytest or MPI output, no silent success. One table row per subcommand and bad input."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rumus.cli import COMMANDS, main

# Each row: (id, argv builder given the folder of prepared files, text the error line must contain).
Row = tuple[str, Callable[[Path], list[str]], str]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "binary.dat").write_bytes(b"\x00\x01\xff\xfe\x80" * 40)
    (tmp_path / "junk.txt").write_text("not what any command reads\n")
    (tmp_path / "script.py").write_text("print('never run')\n")
    (tmp_path / "hosts").write_text("localhost slots=1\n")
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


ROWS: list[Row] = [
    ("no command", lambda d: [], "usage: rumus COMMAND"),
    ("unknown command", lambda d: ["frobnicate"], "unknown command 'frobnicate'"),
    ("info: unknown option", lambda d: ["info", "--bogus"], "unrecognized arguments: --bogus"),
    ("demo: unknown option", lambda d: ["demo", "--bogus"], "unrecognized arguments"),
    ("demo: epochs < 1", lambda d: ["demo", "--epochs", "-1"], "-1 is not >= 1"),
    ("demo: lr not a number", lambda d: ["demo", "--lr", "fast"], "'fast' is not a number"),
    ("demo lm: steps < 1", lambda d: ["demo", "lm", "--steps", "0"], ">= 1"),
    ("serve: no such checkpoint", lambda d: ["serve", str(d / "missing")], "config.json"),
    ("serve: port out of range", lambda d: ["serve", str(d), "--port", "99999"], "not a TCP port"),
    ("serve: max-running 0", lambda d: ["serve", str(d), "--max-running", "0"], "0 is not >= 1"),
    ("conformance: unknown backend", lambda d: ["conformance", "--backend", "nope"], "no backend 'nope'"),
    ("conformance: binary xfails", lambda d: ["conformance", "--xfails", str(d / "binary.dat")], "decode"),
    ("conformance: missing xfails", lambda d: ["conformance", "--xfails", str(d / "missing.txt")], "missing.txt"),
    ("rrec: no subcommand", lambda d: ["rrec"], "required"),
    ("rrec inspect: not an rrec file", lambda d: ["rrec", "inspect", str(d / "junk.txt")], "not a .rrec file"),
    ("rrec verify: not an rrec file", lambda d: ["rrec", "verify", str(d / "binary.dat")], "not a .rrec file"),
    ("rrec verify: missing file", lambda d: ["rrec", "verify", str(d / "missing.rrec")], "missing.rrec"),
    ("rrec convert: not an npz", lambda d: ["rrec", "convert", str(d / "junk.txt"), str(d / "o.rrec")], "error"),
    ("fixed: no subcommand", lambda d: ["fixed"], "only subcommand is verify"),
    ("fixed verify: missing file", lambda d: ["fixed", "verify", str(d / "missing.json")], "no such file"),
    ("fixed verify: not json", lambda d: ["fixed", "verify", str(d / "junk.txt")], "not valid JSON"),
    ("onnx: unknown subcommand", lambda d: ["onnx", "bogus"], "invalid choice"),
    ("onnx check: missing file", lambda d: ["onnx", "check", str(d / "missing.onnx")], "no such ONNX file"),
    ("onnx check: junk file", lambda d: ["onnx", "check", str(d / "junk.txt")], "not a readable ONNX model"),
    ("onnx run: junk file", lambda d: ["onnx", "run", str(d / "binary.dat"), "--input", "2,3"], "not a readable"),
    ("onnx export: no such module",
     lambda d: ["onnx", "export", "nomodule:f", str(d / "o.onnx"), "--input-shape", "2,3"], "cannot import"),
    ("onnx export: factory needs arguments",
     lambda d: ["onnx", "export", "rumus.nn:Linear", str(d / "o.onnx"), "--input-shape", "2,3"], "needs arguments"),
    ("onnx export: bad shape",
     lambda d: ["onnx", "export", "rumus.nn:ReLU", str(d / "o.onnx"), "--input-shape", "2,three"], "not a shape"),
    ("quantize: no arguments", lambda d: ["quantize"], "required"),
    ("quantize: factory needs arguments",
     lambda d: ["quantize", str(d / "junk.txt"), "--model", "rumus.nn:Linear"], "needs arguments"),
    ("quantize: no such module", lambda d: ["quantize", str(d / "junk.txt"), "--model", "nomodule:f"],
     "cannot import"),
    ("launch: no arguments", lambda d: ["launch"], "required"),
    ("launch: missing script", lambda d: ["launch", "-n", "2", str(d / "missing.py")], "no script"),
    ("launch: zero ranks", lambda d: ["launch", "-n", "0", str(d / "script.py")], "0 is not >= 1"),
    ("launch: hostfile with too few slots",
     lambda d: ["launch", "-n", "4", "--hostfile", str(d / "hosts"), str(d / "script.py")], "1 slots for 4 ranks"),
]


def _is_one_answer(err: str) -> bool:
    """One line, or argparse's: a usage line (wrapped over indented lines) and then its error line."""
    lines = err.strip().splitlines()
    if len(lines) == 1:
        return True
    return lines[0].startswith("usage:") and all(ln.startswith(" ") for ln in lines[1:-1]) and \
        "error:" in lines[-1]


@pytest.mark.parametrize("argv_of, expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_is_one_line_and_exit_2(files: Path, argv_of: Callable[[Path], list[str]], expected: str,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    rc = main(argv_of(files))
    out, err = capfd.readouterr()
    assert rc == 2, (rc, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err, err
    assert _is_one_answer(err), err
    assert expected in err, err


def test_serve_on_a_busy_port_is_one_line_and_exit_2(files: Path, busy_port: int,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    rc = main(["serve", str(files), "--port", str(busy_port)])
    err = capfd.readouterr().err
    assert rc == 2 and _is_one_answer(err) and f"127.0.0.1:{busy_port}" in err and "--port" in err, err


def test_every_subcommand_has_a_bad_input_row() -> None:
    covered = {r[1](Path("."))[0] for r in ROWS if r[1](Path("."))}
    assert covered - {"frobnicate"} == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"fixed"}))
def test_help_prints_help_and_exits_0(command: str, capfd: pytest.CaptureFixture[str]) -> None:
    rc = main([command, "--help"])
    out, err = capfd.readouterr()
    assert rc == 0 and out.startswith("usage: rumus") and not err, (rc, out, err)


def test_help_texts_end_their_sentences_and_show_defaults(capfd: pytest.CaptureFixture[str]) -> None:
    main(["demo", "--help"])
    out = capfd.readouterr().out
    assert "(default: 15)" in out and "(default: ./runs/demo)" in out

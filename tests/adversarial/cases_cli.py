"""Hostile input to every `rumus` subcommand: random bytes where a file is read, and values no option takes
(negative, zero, huge, empty, not a number, NaN) for every numeric option. Each must end with exit status 2
and one line on stderr (argparse's usage line before its error line counts), never a traceback, an internal
error (3) or a run that goes ahead."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable, Iterator

import numpy as np
from adversarial_cases import Case

# subcommand argv with FILE where a path goes
FILE_COMMANDS = {
    "rrec inspect": ["rrec", "inspect", "FILE"],
    "rrec verify": ["rrec", "verify", "FILE"],
    "rrec convert": ["rrec", "convert", "FILE", "OUT"],
    "fixed verify": ["fixed", "verify", "FILE"],
    "onnx check": ["onnx", "check", "FILE"],
    "onnx run": ["onnx", "run", "FILE", "--input", "2,3"],
    "conformance --xfails": ["conformance", "--xfails", "FILE"],
    "quantize --calib": ["quantize", "FILE", "--model", "rumus.nn:Identity", "--calib", "FILE"],
}

# (argv before the value, argv after it) for every numeric option a user types
NUMERIC_OPTIONS = {
    "demo --epochs": (["demo", "--epochs"], []),
    "demo --batch-size": (["demo", "--batch-size"], []),
    "demo --lr": (["demo", "--lr"], []),
    "demo lm --steps": (["demo", "lm", "--steps"], []),
    "serve --port": (["serve", "DIR", "--port"], []),
    "serve --max-running": (["serve", "DIR", "--max-running"], []),
    "serve --drain-timeout": (["serve", "DIR", "--drain-timeout"], []),
    "quantize --group-size": (["quantize", "x.safetensors", "--model", "m:f", "--group-size"], []),
    "launch -n": (["launch", "-n"], ["script.py"]),
    "launch --timeout": (["launch", "-n", "2", "--timeout"], ["script.py"]),
}
BAD_NUMBERS = ["-1", "0", "nan", "", "ten", "1e999", "-0"]


def _run(argv: list[str]) -> tuple[int, str]:
    from rumus.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def _is_text(data: bytes) -> bool:
    try:
        return "\x00" not in data.decode("utf-8")
    except UnicodeDecodeError:
        return False


def _judge(name: str, argv: list[str]) -> Case:
    rc, err = _run(argv)
    lines = err.strip().splitlines()
    one_answer = len(lines) == 1 or (bool(lines) and lines[0].startswith("usage:") and "error:" in lines[-1]
                                     and all(ln.startswith(" ") for ln in lines[1:-1]))
    if rc != 2:
        return Case(name, f"exit status {rc}, expected 2: {err.strip()[-120:]}")
    if "Traceback" in err or not one_answer:
        return Case(name, f"{len(lines)} lines on stderr, expected one: {err.strip()[:120]}")
    return Case(name, None)


def cli_hostile_files() -> Iterator[Case]:
    rng = np.random.default_rng(36)
    with tempfile.TemporaryDirectory() as d:
        payloads = {"empty": b"", "zeros": bytes(100), "random": rng.bytes(300), "text": b"hello\n",
                    "almost rrec": b"RREC" + rng.bytes(20), "almost zip": b"PK\x03\x04" + rng.bytes(60)}
        for label, data in payloads.items():
            path = os.path.join(d, f"{label.replace(' ', '_')}.bin")
            with open(path, "wb") as f:
                f.write(data)
            for command, template in FILE_COMMANDS.items():
                if command.startswith("conformance") and _is_text(data):
                    continue  # a text file is a valid (empty or unmatched) xfails list: the whole suite would run
                argv = [path if a == "FILE" else os.path.join(d, "out.rrec") if a == "OUT" else a for a in template]
                case = _judge(f"{command}: {label} file", argv)
                if label == "almost rrec" and command.startswith("rrec ") and command != "rrec convert" \
                        and case.problem and "exit status 1" in case.problem:
                    case = Case(case.name, None)  # a damaged .rrec file fails the check (1): documented
                yield case


def cli_hostile_numbers() -> Iterator[Case]:
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "script.py")
        with open(script, "w") as f:
            f.write("raise SystemExit('never run')\n")
        for option, (before, after) in NUMERIC_OPTIONS.items():
            for value in BAD_NUMBERS:
                argv = [d if a == "DIR" else a for a in before] + [value] + \
                    [script if a == "script.py" else a for a in after]
                yield _judge(f"{option} {value!r}", argv)


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "CLI: hostile files to every file-reading subcommand": cli_hostile_files,
    "CLI: values no numeric option takes": cli_hostile_numbers,
}

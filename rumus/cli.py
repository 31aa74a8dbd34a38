"""The `rumus` command: info, demo, conformance, rrec, fixed, onnx, quantize, serve, launch.

Exit codes shared by every subcommand: 0 success, 1 the check it ran failed, 2 bad input (a usage
error, a missing, unreadable or malformed file: one line on stderr naming the problem), 3 an internal
error (one line asking for a report; RUMUS_TRACEBACK=1 shows the traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from rumus_contracts import RumusError

from . import _runtime

EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 2, 3, 130


def info(argv: list[str]) -> int:
    """Backends, devices, capabilities and plugins found."""
    loaded = _runtime.plugins()
    print(f"rumus {__import__('rumus').__version__}")
    print(f"plugins loaded: {', '.join(loaded.loaded)}")
    for name, err in loaded.failures.items():
        print(f"plugin FAILED: {name}: {err}")
    for name, parts in loaded.problems.items():  # loaded, but parts failed (e.g. a CPU kernel module)
        print(f"plugin PARTLY FAILED: {name}: " + "; ".join(parts))
    print(f"ops registered: {len(loaded.ops)}")
    for name in loaded.backends.names():
        status = loaded.backends.status(name)
        if status != "ok":
            print(f"backend {name}: unavailable ({status})")
            continue
        be = loaded.backends.get(name)
        kernels = loaded.kernels.ops_for(name)
        for dev in be.devices():
            caps = be.capabilities(dev)
            print(f"backend {name}: device {dev}  {caps.description}")
            print(f"    dtypes: {', '.join(d.name for d in caps.dtypes)}")
            if caps.features:
                print(f"    features: {', '.join(caps.features)}")
            if caps.limits:
                print("    limits: " + ", ".join(f"{k}={v}" for k, v in caps.limits.items()))
        print(f"    kernels: {len(kernels)} ops")
        from rumus_contracts import PRIMITIVES
        from ._dispatch import DECOMPOSITIONS
        missing = sorted(PRIMITIVES - set(kernels))  # for some dtype at least: the rest is conformance's to say
        decomposed = sorted(set(DECOMPOSITIONS) - set(kernels))
        print(f"    primitives without a kernel: {', '.join(missing) or 'none'}")
        print(f"    ops run by decomposition (no kernel of their own): {len(decomposed)}"
              + (f" ({', '.join(decomposed)})" if decomposed else ""))
    try:
        print(f"default device: {_runtime.default_device()}")
    except Exception as exc:
        print(f"default device: unavailable ({exc})")
        return 1
    return 0


def _delegate(module: str, attr: str) -> Callable[[list[str]], int]:
    # Tools living outside the core (conformance suite, data and fixed-point CLIs) are found by name.
    def run(argv: list[str]) -> int:
        return int(getattr(importlib.import_module(module), attr)(argv))
    return run


def demo(argv: list[str]) -> int:
    """`rumus demo` (the classifier demo) or `rumus demo lm` (train a small byte-level GPT-2 to serve)."""
    if argv and argv[0] == "lm":
        return _delegate("rumus.serve.demo_lm", "main")(argv[1:])
    return _delegate("rumus.demo", "main")(argv)


def fixed(argv: list[str]) -> int:
    """`rumus fixed verify FILE...`: re-run fixed-point fixtures and compare their outputs bit for bit."""
    if not argv or argv[0] != "verify":
        print("usage: rumus fixed verify FILE [FILE ...]")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return _delegate("rumus.fixed.cli", "verify_main")(argv[1:])


COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "info": (info, "print backends, devices, capabilities and plugins"),
    "demo": (demo, "train the demo model on the default backend; demo lm: train a small LM to serve"),
    "serve": (_delegate("rumus.serve.server", "main"), "serve CHECKPOINT: an HTTP inference server (serve extra)"),
    "conformance": (_delegate("rumus_conformance.runner", "main"), "run the conformance suite on a backend"),
    "rrec": (_delegate("rumus.data.cli", "main"), "inspect / verify / convert .rrec record files"),
    "fixed": (fixed, "fixed verify FILE: re-run a fixed-point fixture and check it bit for bit"),
    "onnx": (_delegate("rumus.onnx.cli", "main"), "onnx export|check|run: ONNX files (needs the onnx package)"),
    "quantize": (_delegate("rumus.quant.cli", "main"), "quantize a checkpoint's Linear layers (q8/int4; rtn/gptq/awq)"),
    "launch": (_delegate("rumus.distributed.launch", "main"), "launch -n N script.py: run a script on N MPI ranks"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        p = argparse.ArgumentParser(prog="rumus")
        p.add_argument("command", choices=sorted(COMMANDS))
        print(p.format_usage().strip())
        for name, (_, help_text) in sorted(COMMANDS.items()):
            print(f"  {name:<12} {help_text}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return _guarded(argv[0], COMMANDS[argv[0]][0], argv[1:])


def _guarded(name: str, command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a subcommand so that bad input is one line and an exit code, never a traceback."""
    try:
        return command(argv)
    except SystemExit as exc:  # argparse inside a subcommand: it has printed its usage line already
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"rumus {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (RumusError, OSError, MemoryError) as exc:  # bad input: a malformed or missing file, no memory
        print(f"rumus {name}: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:
        if os.environ.get("RUMUS_TRACEBACK"):
            raise
        print(f"rumus {name}: internal error: {type(exc).__name__}: {_one_line(exc)} (please report this; "
              f"RUMUS_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_INTERNAL


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 500 else text[:497] + "..."


if __name__ == "__main__":
    sys.exit(main())

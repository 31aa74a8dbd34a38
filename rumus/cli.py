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
import tempfile
import textwrap
from collections.abc import Callable

from rumus_contracts import RumusError, config

from . import _runtime

EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 2, 3, 130


WIDTH = 100  # `rumus info` keeps to this many columns


def _top_level_parts(text: str) -> list[str]:
    """`text` split at "; " outside parentheses (a backend's description lists its policies that way)."""
    parts, depth, current = [], 0, ""
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0 and text[i + 1:i + 2] == " ":
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    return [*parts, current.strip()] if current.strip() else parts


def _field(label: str, value: str, indent: int = 4) -> str:
    """`label: value` wrapped to WIDTH columns, continuation lines under the value."""
    head = " " * indent + f"{label + ':' if label else '':<14} "
    return textwrap.fill(value, WIDTH, initial_indent=head, subsequent_indent=" " * len(head),
                         break_on_hyphens=False)


def info(argv: list[str]) -> int:
    """Backends, devices, capabilities and plugins found."""
    p = argparse.ArgumentParser(prog="rumus info", description="Print the version, the plugins loaded, the "
                                "environment knobs set, and each backend's devices, dtypes, features, limits "
                                "and thread policy.")
    p.add_argument("--config", action="store_true", help="print every environment knob RUMUS reads (RUMUS_*), "
                   "with its value in force and what it does, and nothing else (docs/CONFIG.md lists them too)")
    args = p.parse_args(argv)
    from . import config as knobs
    if args.config:
        print(knobs.table(WIDTH))
        return 0
    loaded = _runtime.plugins()
    print(f"rumus {__import__('rumus').__version__} (Python {sys.version.split()[0]})")
    chosen = knobs.set_by_user()
    print(textwrap.fill(f"configuration: {', '.join(chosen) if chosen else 'defaults'} (rumus info --config "
                        f"lists every knob)", WIDTH, subsequent_indent="    ", break_on_hyphens=False))
    print(textwrap.fill(f"plugins loaded: {', '.join(loaded.loaded)}", WIDTH, subsequent_indent="    "))
    for name, err in loaded.failures.items():
        print(textwrap.fill(f"plugin FAILED: {name}: {err}", WIDTH, subsequent_indent="    "))
    for name, parts in loaded.problems.items():  # loaded, but parts failed (e.g. a CPU kernel module)
        print(textwrap.fill(f"plugin PARTLY FAILED: {name}: " + "; ".join(parts), WIDTH, subsequent_indent="    "))
    print(f"ops registered: {len(loaded.ops)}")
    status_code = 0
    try:
        print(f"default device: {_runtime.default_device()}")
    except Exception as exc:
        print(textwrap.fill(f"default device: unavailable ({exc})", WIDTH, subsequent_indent="    "))
        status_code = 1
    for name in loaded.backends.names():
        print()
        status = loaded.backends.status(name)
        if status != "ok":
            print(textwrap.fill(f"backend {name}: unavailable ({status})", WIDTH, subsequent_indent="    "))
            continue
        be = loaded.backends.get(name)
        kernels = loaded.kernels.ops_for(name)
        for dev in be.devices():
            caps = be.capabilities(dev)
            first, *rest = _top_level_parts(caps.description) or [""]
            print(f"backend {name}: device {dev}")
            print(_field("about", first))
            for part in rest:
                label, sep, value = part.partition(": ")
                if not (sep and len(label) < 14 and "(" not in label):  # no "name: " prefix: its first word
                    label, _, value = part.partition(" ")
                print(_field(label, value))
            print(_field("dtypes", ", ".join(d.name for d in caps.dtypes)))
            if caps.features:
                print(_field("features", ", ".join(caps.features)))
            if caps.limits:
                print(_field("limits", ", ".join(f"{k}={v}" for k, v in caps.limits.items())))
        print(_field("kernels", f"{len(kernels)} ops"))
        from rumus_contracts import PRIMITIVES
        from ._dispatch import DECOMPOSITIONS
        missing = sorted(PRIMITIVES - set(kernels))  # for some dtype at least: the rest is conformance's to say
        decomposed = sorted(set(DECOMPOSITIONS) - set(kernels))
        print(_field("primitives", "all have a kernel" if not missing else "no kernel for " + ", ".join(missing)))
        print(_field("decomposed", f"{len(decomposed)} ops run by decomposition (no kernel of their own)"
                     + (f": {', '.join(decomposed)}" if decomposed else "")))
    return status_code


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
        helped = bool(argv) and argv[0] in ("-h", "--help")
        print("usage: rumus fixed verify FILE [FILE ...]", file=sys.stdout if helped else sys.stderr)
        if not helped:
            print("rumus fixed: error: the only subcommand is verify (rumus fixed verify FIXTURE.json)",
                  file=sys.stderr)
        return 0 if helped else EXIT_BAD_INPUT
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


def _quiet_vulkan_loader() -> None:
    # Mesa's Vulkan loader prints "XDG_RUNTIME_DIR is invalid or not set" once per device query without an
    # absolute XDG_RUNTIME_DIR; the WebGPU backend needs no display, so any private directory will do
    if not os.environ.get("XDG_RUNTIME_DIR", "").startswith("/"):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.gettempdir()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_vulkan_loader()
    if argv and argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if not argv:
        print(_usage().splitlines()[0], file=sys.stderr)
        print(f"rumus: error: no command given (choose from {', '.join(sorted(COMMANDS))})", file=sys.stderr)
        return EXIT_BAD_INPUT
    if argv[0] not in COMMANDS:
        print(f"rumus: error: unknown command {argv[0]!r} (choose from {', '.join(sorted(COMMANDS))}; "
              f"rumus --help lists them)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _guarded(argv[0], COMMANDS[argv[0]][0], argv[1:])


def _usage() -> str:
    lines = ["usage: rumus COMMAND [ARGS...]   (rumus COMMAND --help for a command's options)", "", "commands:"]
    lines += [f"  {name:<12} {help_text}" for name, (_, help_text) in sorted(COMMANDS.items())]
    return "\n".join(lines)


def _guarded(name: str, command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a subcommand so that bad input is one line and an exit code, never a traceback."""
    try:
        return command(argv)
    except SystemExit as exc:  # argparse inside a subcommand: it has printed its usage line already
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"rumus {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (RumusError, OSError, MemoryError, UnicodeDecodeError) as exc:  # bad input: a malformed, binary or
        # missing file, no memory
        print(f"rumus {name}: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:
        if config.flag("RUMUS_TRACEBACK"):
            raise
        print(f"rumus {name}: internal error: {type(exc).__name__}: {_one_line(exc)} (please report this; "
              f"RUMUS_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_INTERNAL


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 500 else text[:497] + "..."


if __name__ == "__main__":
    sys.exit(main())

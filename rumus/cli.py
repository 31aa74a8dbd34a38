"""The `rumus` command: info, demo, conformance, rrec, fixed, launch."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from . import _runtime


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


def fixed(argv: list[str]) -> int:
    """`rumus fixed verify FILE...`: re-run fixed-point fixtures and compare their outputs bit for bit."""
    if not argv or argv[0] != "verify":
        print("usage: rumus fixed verify FILE [FILE ...]")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return _delegate("rumus.fixed.cli", "verify_main")(argv[1:])


COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "info": (info, "print backends, devices, capabilities and plugins"),
    "demo": (_delegate("rumus.demo", "main"), "train the demo model on the default backend"),
    "conformance": (_delegate("rumus_conformance.runner", "main"), "run the conformance suite on a backend"),
    "rrec": (_delegate("rumus.data.cli", "main"), "inspect / verify / convert .rrec record files"),
    "fixed": (fixed, "fixed verify FILE: re-run a fixed-point fixture and check it bit for bit"),
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
    return COMMANDS[argv[0]][0](argv[1:])


if __name__ == "__main__":
    sys.exit(main())

"""Argument checks the `rumus` subcommands share, so every bad value is refused the same way: argparse's
usage line and one `error:` line naming the value and what would do, exit status 2.

`positive_int`, `nonnegative_int`, `positive_float` and `port` are argparse `type=` callables;
`load_factory` resolves a `package.module:factory` argument (as `rumus onnx export` and `rumus quantize`
take) into the zero-argument callable it names, raising `FactoryError` with the reason otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Callable
from typing import Any, cast

from rumus_contracts import RumusError

__all__ = ["FactoryError", "load_factory", "nonnegative_int", "port", "positive_float", "positive_int"]


class FactoryError(RumusError, ValueError):
    """A `package.module:factory` argument that names nothing callable without arguments."""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """A whole number >= 1 (epochs, steps, ranks, batch sizes)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def nonnegative_int(text: str) -> int:
    """A whole number >= 0 (seeds, queue lengths)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not >= 0")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, timeouts)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number > 0")
    return value


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1 to 65535)")
    return value


def load_factory(spec: str, option: str) -> Callable[[], Any]:
    """The zero-argument callable `spec` ("package.module:name") names; `option` (e.g. "--model") is the
    argument it came from, for the message. Raises FactoryError when the module does not import, has no
    such name, or the name is not callable without arguments."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise FactoryError(f"{option} must look like package.module:factory, got {spec!r}")
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise FactoryError(f"{option} {spec}: cannot import {mod_name!r} ({exc}); is it on PYTHONPATH?") from None
    found: Any = getattr(module, attr, None)
    if not callable(found):
        raise FactoryError(f"{option} {spec}: module {mod_name!r} has no callable named {attr!r}")
    try:
        params = inspect.signature(found).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return cast(Callable[[], Any], found)
    needed = [p.name for p in params if p.default is p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if needed:
        raise FactoryError(f"{option} {spec} needs arguments ({', '.join(needed)}); name a function that builds "
                           f"the model with none (e.g. def make(): return {attr}(...))")
    return cast(Callable[[], Any], found)

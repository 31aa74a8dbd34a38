"""RUMUS's settings: every environment knob, declared once in `rumus_contracts.config`.

    >>> import rumus.config as cfg
    >>> cfg.get("RUMUS_BACKEND")
    'cpu'

`rumus info --config` prints the table with each knob's current value; docs/CONFIG.md is generated from
it (`python -m rumus.config --markdown`). User-facing knobs come first; the rest are experiment and test
switches that force one side of a choice the code otherwise makes itself. A plugin declares its own knobs
when its modules are imported, so the listings load the plugins first (as any first use of an op does).
"""
from __future__ import annotations

import sys
import textwrap

from rumus_contracts import RumusError
from rumus_contracts.config import KNOBS, ConfigError, Knob, declare, flag, get, integer, is_set, text

__all__ = ["KNOBS", "ConfigError", "Knob", "declare", "flag", "get", "integer", "is_set", "text", "knobs",
           "set_by_user", "table", "markdown"]


def _load_plugins() -> None:
    from . import _runtime
    try:
        _runtime.plugins()
    except RumusError:  # e.g. RUMUS_DISABLE_PLUGIN_AUTOLOAD does not parse: the table shows why
        pass


def knobs() -> list[Knob]:
    """Every declared knob, the loaded plugins' included: user-facing first, then by owner and name."""
    _load_plugins()
    return sorted(KNOBS.values(), key=lambda k: (not k.user, k.owner != "core", k.owner, k.name))


def _now(name: str) -> str:
    try:
        return _shown(get(name)) + (" (set)" if is_set(name) else "")
    except ConfigError as exc:
        return f"invalid: {exc}"


def set_by_user() -> list[str]:
    """`NAME=value` for each knob whose variable is set (for `rumus info`'s configuration line)."""
    out = []
    for k in (k for k in knobs() if is_set(k.name)):
        try:
            out.append(f"{k.name}={_shown(get(k.name))}")
        except ConfigError:
            out.append(f"{k.name} (invalid: see rumus info --config)")
    return out


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "(unset)" if value is None or value == "" else repr(value) if isinstance(value, str) else str(value)


def _kind(knob: Knob, sep: str = "|") -> str:
    if knob.kind == "choice":
        return sep.join(knob.choices)
    return knob.kind + (f" >= {knob.least:g}" if knob.least is not None else "")


def table(width: int = 100) -> str:
    """The knobs with their current values, for `rumus info --config` (lines of at most `width` columns)."""
    lines: list[str] = []
    for group, want in (("user-facing", True), ("experiments and test switches", False)):
        lines.append(f"{group}:")
        for k in (k for k in knobs() if k.user is want):
            lines.append(textwrap.fill(f"{k.name} = {_now(k.name)}", width, initial_indent="  ",
                                       subsequent_indent=" " * 6, break_on_hyphens=False))
            lines.append(textwrap.fill(f"{k.doc} [{_kind(k)}, {k.owner}]", width, initial_indent=" " * 6,
                                       subsequent_indent=" " * 6, break_on_hyphens=False))
    return "\n".join(lines)


def markdown() -> str:
    """docs/CONFIG.md: the declared table, with defaults rather than this process's values."""
    out = ["# Configuration", "",
           "Every environment variable RUMUS reads, generated from `rumus_contracts.config` by",
           "`python -m rumus.config --markdown > docs/CONFIG.md` (a test keeps the page current).",
           "`rumus info --config` shows the values in force. A value that does not parse is an error",
           "naming the variable; an unset or empty variable means the default. Plugins declare their own",
           "knobs (owner: the plugin); the page lists those of the plugins installed when it was generated.", ""]
    for group, want in (("User-facing", True), ("Experiments and test switches", False)):
        out += [f"## {group}", "", "| variable | type | default | read by | what it does |", "|---|---|---|---|---|"]
        for k in (k for k in knobs() if k.user is want):
            out.append(f"| `{k.name}` | {_kind(k, ' / ')} | {_shown(k.default)} | {k.owner} | {k.doc} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown() if "--markdown" in sys.argv[1:] else table() + "\n")

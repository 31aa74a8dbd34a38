"""RUMUS's settings: every environment knob, declared once in `rumus_contracts.config`.

    >>> import rumus.config as cfg
    >>> cfg.get("RUMUS_BACKEND")
    'cpu'

`rumus info --config` prints the table with each knob's current value; docs/CONFIG.md is generated from
it (`python -m rumus.config --markdown`). User-facing knobs come first; the rest are experiment and test
switches that force one side of a choice the code otherwise makes itself.
"""
from __future__ import annotations

import sys

from rumus_contracts.config import KNOBS, ConfigError, Knob, declare, flag, get, integer, is_set, text

__all__ = ["KNOBS", "ConfigError", "Knob", "declare", "flag", "get", "integer", "is_set", "text", "knobs",
           "table", "markdown"]


def knobs() -> list[Knob]:
    """Every declared knob: user-facing first, then by owner and name."""
    return sorted(KNOBS.values(), key=lambda k: (not k.user, k.owner != "core", k.owner, k.name))


def _shown(value: object) -> str:
    return "(unset)" if value is None or value == "" else repr(value) if isinstance(value, str) else str(value)


def _kind(knob: Knob) -> str:
    return "|".join(knob.choices) if knob.kind == "choice" else knob.kind


def table(width: int = 100) -> str:
    """The knobs with their current values, for `rumus info --config` (lines of at most `width` columns)."""
    lines: list[str] = []
    for group, want in (("user-facing", True), ("experiments and test switches", False)):
        lines.append(f"{group}:")
        for k in (k for k in knobs() if k.user is want):
            try:
                now = _shown(get(k.name)) + (" (set)" if is_set(k.name) else "")
            except ConfigError as exc:
                now = f"invalid: {exc}"
            lines.append(f"  {k.name} = {now}"[:width])
            lines.append(f"      {k.doc}"[:width])
    return "\n".join(lines)


def markdown() -> str:
    """docs/CONFIG.md: the declared table, with defaults rather than this process's values."""
    out = ["# Configuration", "",
           "Every environment variable RUMUS reads, generated from `rumus_contracts.config` by",
           "`python -m rumus.config --markdown > docs/CONFIG.md` (a test keeps the page current).",
           "`rumus info --config` shows the values in force. A value that does not parse is an error",
           "naming the variable; an unset or empty variable means the default.", ""]
    for group, want in (("User-facing", True), ("Experiments and test switches", False)):
        out += [f"## {group}", "", "| variable | type | default | read by | what it does |", "|---|---|---|---|---|"]
        for k in (k for k in knobs() if k.user is want):
            out.append(f"| `{k.name}` | {_kind(k)} | {_shown(k.default)} | {k.owner} | {k.doc} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown() if "--markdown" in sys.argv[1:] else table())

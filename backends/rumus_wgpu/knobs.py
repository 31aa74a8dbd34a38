"""The backend's environment knobs (declared in rumus_contracts.config), read cheaply enough for the per-op path.

`config.get` parses the variable on every call (about 1 us); an elementwise op asks for RUMUS_WGPU_NOVEC on
every launch. Here each knob's parsed value is kept per raw value of its variable, and the raw value is
looked up in os.environ's own dict: a changed variable (a test's monkeypatch.setenv) is seen at once, and
a value the declaration does not accept raises `ConfigError` each time it is read, as through `config`.
"""

from __future__ import annotations

import os
from typing import Any

from rumus_contracts import config

_ENV_DATA: dict[Any, Any] | None = getattr(os.environ, "_data", None)
# knob name -> (its key in os.environ's own dict, {raw value: parsed value})
_SEEN: dict[str, tuple[Any, dict[Any, config.Value]]] = {}


def _entry(name: str) -> tuple[Any, dict[Any, config.Value]]:
    config.is_set(name)  # an undeclared name raises here, before anything is cached for it
    entry = _SEEN[name] = (os.environ.encodekey(name), {})
    return entry


def value(name: str) -> config.Value:
    """config.get(name), parsed once per distinct value of the variable."""
    if _ENV_DATA is None:
        return config.get(name)
    key, seen = _SEEN.get(name) or _entry(name)
    raw = _ENV_DATA.get(key)
    try:
        return seen[raw]
    except KeyError:
        parsed = seen[raw] = config.get(name)
        return parsed


def env_set(name: str) -> bool:
    """Whether flag knob `name` is on (config.flag; `value` written out: this runs several times per op)."""
    if _ENV_DATA is None:
        return config.flag(name)
    key, seen = _SEEN.get(name) or _entry(name)
    raw = _ENV_DATA.get(key)
    try:
        return bool(seen[raw])
    except KeyError:
        parsed = seen[raw] = config.get(name)
        return bool(parsed)

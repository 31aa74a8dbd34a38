"""Plugin discovery and defensive loading.

Plugins are found through the entry-point group `rumus`. The backends and extensions that ship
with RUMUS are loaded the same way; in a source checkout that was never pip-installed (no entry
points), their module names below are imported directly. A plugin that fails to import or whose
hook raises is reported with its name and error, and skipped: never fatal.

RUMUS_DISABLE_PLUGIN_AUTOLOAD=1 turns off autoloading of third-party plugins;
RUMUS_PLUGINS=a,b loads only the named third-party plugins.
"""

from __future__ import annotations

import importlib
import os
import warnings
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .registry import BackendRegistry, KernelRegistry
from .schema import OpRegistry

ENTRY_POINT_GROUP = "rumus"
BUILTIN_PLUGINS: dict[str, str] = {
    "cpu": "rumus_cpu.plugin",
    "wgpu": "rumus_wgpu.plugin",
    "multigpu": "rumus_multigpu.plugin",
}


@dataclass
class LoadedPlugins:
    manager: pluggy.PluginManager
    ops: OpRegistry
    kernels: KernelRegistry
    backends: BackendRegistry
    loaded: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _candidates() -> list[tuple[str, str, bool]]:
    """(plugin name, "module[:attr]", is_builtin) in load order: builtins first."""
    found: dict[str, tuple[str, bool]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        builtin = dist is not None and dist.metadata["Name"] == "rumus"
        found[ep.name] = (ep.value, builtin)
    for name, module in BUILTIN_PLUGINS.items():
        found.setdefault(name, (module, True))
    if _truthy("RUMUS_DISABLE_PLUGIN_AUTOLOAD"):
        found = {n: v for n, v in found.items() if v[1]}
    only = [p.strip() for p in os.environ.get("RUMUS_PLUGINS", "").split(",") if p.strip()]
    if only:
        found = {n: v for n, v in found.items() if v[1] or n in only}
    order = sorted(found.items(), key=lambda kv: (not kv[1][1], kv[0]))
    return [(name, value, builtin) for name, (value, builtin) in order]


def _import(value: str) -> Any:
    module_name, _, attr = value.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def load_plugins(core_plugins: list[tuple[str, ModuleType | object]] | None = None) -> LoadedPlugins:
    """Create the plugin manager, load every plugin, and fill the three registries."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    result = LoadedPlugins(pm, OpRegistry(), KernelRegistry(), BackendRegistry())
    for name, obj in core_plugins or []:
        pm.register(obj, name=name)
        result.loaded.append(name)
    for name, value, builtin in _candidates():
        try:
            plugin = _import(value)
        except ModuleNotFoundError as exc:
            if builtin and exc.name and value.startswith(exc.name):
                continue  # a builtin backend that this installation does not include
            _fail(result, name, exc)
            continue
        except Exception as exc:  # broken third-party code must not stop the framework
            _fail(result, name, exc)
            continue
        try:
            pm.register(plugin, name=name)
        except Exception as exc:
            _fail(result, name, exc)
            continue
        result.loaded.append(name)
    _call_each(result, "rumus_register_backends", result.backends)
    _call_each(result, "rumus_register_ops", result.ops)
    _call_each(result, "rumus_register_kernels", result.kernels)
    return result


def _call_each(result: LoadedPlugins, hook_name: str, registry: Any) -> None:
    """Call each plugin's implementation separately, so one broken plugin cannot hide the others."""
    hook = getattr(result.manager.hook, hook_name)
    for impl in reversed(hook.get_hookimpls()):  # pluggy lists last-registered first
        name = result.manager.get_name(impl.plugin) or "?"
        if name in result.failures:
            continue
        try:
            _with_owner(registry, name, impl.function)
        except Exception as exc:
            _fail(result, name, exc)


def _with_owner(registry: Any, owner: str, fn: Any) -> None:
    original = registry.register

    def register(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("owner", owner)
        return original(*args, **kwargs)

    registry.register = register
    try:
        fn(registry)
    finally:
        del registry.register


def _fail(result: LoadedPlugins, name: str, exc: BaseException) -> None:
    result.failures[name] = f"{type(exc).__name__}: {exc}"
    warnings.warn(f"rumus: plugin '{name}' failed to load and was skipped: {result.failures[name]}",
                  RuntimeWarning, stacklevel=3)

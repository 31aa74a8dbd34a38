"""Plugin discovery and defensive loading.

Plugins are found only through the entry-point group `rumus` (the backends that ship with RUMUS
too: the `rumus` distribution declares them, and `pip install -e .` registers them in a checkout).

Load order decides who owns a name, so it is fixed: the core's own plugins first, then the
entry points of the `rumus` distribution (built-in backends), then third-party plugins sorted by
name. Each hook is called for each plugin separately, in that order (never in pluggy's order, which
calls the last-registered plugin first), so the core and the built-in backends always register
first and a plugin cannot displace them: a plugin that registers an existing op or backend name,
or a kernel that clashes with an existing one at the same priority, is refused with its name.

A plugin that fails to load is reported with its name and error, everything it had registered is
removed again, and the framework carries on without it. "Fails" includes any exception, SystemExit
and other BaseException subclasses raised by the plugin's import or hooks; a plugin's ops are
validated at load (shape and dtype rules run on the op's own samples) and its kernels must be
callable as kernel(outputs, inputs, attrs). KeyboardInterrupt is NOT contained: we cannot tell a
plugin raising it from the user pressing Ctrl-C during a slow import, and a process that swallows
Ctrl-C cannot be stopped; it propagates as it would anywhere else.

RUMUS_DISABLE_PLUGIN_AUTOLOAD=1 turns off autoloading of third-party plugins;
RUMUS_PLUGINS=a,b loads only the named third-party plugins (built-in backends always load).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import config, hookspecs
from .errors import PluginError
from .registry import BackendRegistry, KernelRegistry
from .schema import OpRegistry
from .validation import validate_kernels, validate_schema

ENTRY_POINT_GROUP = "rumus"
BUILTIN_DISTRIBUTION = "rumus"  # entry points of this distribution are the built-in backends
HOOK_ORDER = ("rumus_register_backends", "rumus_register_ops", "rumus_register_kernels")


@dataclass
class LoadedPlugins:
    """The outcome of loading: the registries, who loaded, who failed and why.

    loaded   -- plugin names in load order (core first).
    failures -- plugin name -> error, for plugins that were skipped (nothing of theirs is registered).
    problems -- plugin name -> failures of parts of a plugin that did load (e.g. a kernel module that
                did not import; reported with KernelRegistry.report_failure).
    """

    manager: pluggy.PluginManager
    ops: OpRegistry
    kernels: KernelRegistry
    backends: BackendRegistry
    loaded: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    builtin: list[str] = field(default_factory=list)

    @property
    def problems(self) -> dict[str, list[str]]:
        return dict(self.kernels.problems)

    def all_failures(self) -> list[str]:
        """One line per plugin failure or failed part: what a strict run (conformance) refuses."""
        lines = [f"plugin '{n}' failed to load: {e}" for n, e in self.failures.items()]
        lines += [f"plugin '{n}' loaded partly: {p}" for n, ps in self.problems.items() for p in ps]
        return lines


@dataclass(frozen=True)
class Candidate:
    name: str
    target: str | object  # "module[:attr]" to import, or the plugin object itself
    builtin: bool


def discover() -> tuple[list[Candidate], dict[str, str]]:
    """Entry points of group `rumus` in load order (built-ins first), and name clashes refused."""
    found: dict[str, Candidate] = {}
    clashes: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else "?"
        cand = Candidate(ep.name, ep.value, dist_name == BUILTIN_DISTRIBUTION)
        have = found.get(ep.name)
        if have is None:
            found[ep.name] = cand
        elif have.target != cand.target:  # the same entry point seen twice on sys.path is no clash
            loser = cand if have.builtin or not cand.builtin else have
            found[ep.name] = have if loser is cand else cand
            clashes[f"{ep.name} ({loser.target})"] = (f"PluginError: the entry-point name '{ep.name}' is taken by "
                                                      f"{found[ep.name].target!r}; rename the plugin's entry point")
    if config.flag("RUMUS_DISABLE_PLUGIN_AUTOLOAD"):
        found = {n: c for n, c in found.items() if c.builtin}
    only = [p.strip() for p in config.text("RUMUS_PLUGINS").split(",") if p.strip()]
    if only:
        found = {n: c for n, c in found.items() if c.builtin or n in only}
    return sorted(found.values(), key=lambda c: (not c.builtin, c.name)), clashes


def _import(target: str | object) -> Any:
    if not isinstance(target, str):
        return target
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def load_plugins(core_plugins: Sequence[tuple[str, object]] | None = None,
                 extra: Sequence[Candidate] | None = None,
                 started: Callable[[LoadedPlugins], None] | None = None) -> LoadedPlugins:
    """Create the plugin manager, load every plugin, and fill the three registries.

    core_plugins -- (name, plugin object) registered first; a failure of theirs is raised, not contained.
    extra        -- third-party candidates loaded after the discovered ones (tests load hostile
                    plugins this way), with exactly the same containment and validation.
    started      -- called with the (still empty) result before any plugin loads: the caller can hand
                    the partly loaded registries to a plugin that asks for them while it loads.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    result = LoadedPlugins(pm, OpRegistry(), KernelRegistry(), BackendRegistry())
    if started is not None:
        started(result)
    discovered, clashes = discover()
    for name, error in clashes.items():
        _fail(result, name, error)
    core = [Candidate(name, obj, True) for name, obj in core_plugins or []]
    order: list[Candidate] = []
    for cand in [*core, *discovered, *(extra or [])]:
        if cand.name in {c.name for c in order} or pm.has_plugin(cand.name):
            _fail(result, f"{cand.name} ({cand.target})", f"PluginError: a plugin named '{cand.name}' is loaded")
            continue
        is_core = cand in core
        try:
            plugin = _import(cand.target)
            pm.register(plugin, name=cand.name)
            pm.check_pending()  # a hook function whose name matches no hookspec (a typo) is an error
            _check_hookimpls(pm, cand.name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit and friends too: a plugin must not end the process
            if is_core:
                raise
            if cand.builtin and isinstance(exc, ModuleNotFoundError) and isinstance(cand.target, str) \
                    and exc.name and cand.target.startswith(exc.name):
                continue  # a built-in backend whose package this installation does not include
            if pm.has_plugin(cand.name):
                pm.unregister(name=cand.name)
            _fail(result, cand.name, exc)
            continue
        order.append(cand)
    result.builtin = [c.name for c in order if c.builtin]
    for hook_name in HOOK_ORDER:
        for cand in order:
            if cand.name not in result.failures:
                _call(result, cand, hook_name, is_core=cand in core)
    result.loaded = [c.name for c in order if c.name not in result.failures]
    return result


def _check_hookimpls(pm: pluggy.PluginManager, name: str) -> None:
    plugin = pm.get_plugin(name)
    for caller in pm.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin and (impl.hookwrapper or impl.wrapper):
                raise PluginError(f"hook '{caller.name}' is declared as a wrapper; RUMUS hooks are called "
                                  f"once per plugin, write a plain @hookimpl function")


def _call(result: LoadedPlugins, cand: Candidate, hook_name: str, is_core: bool) -> None:
    """Call one plugin's implementation of one hook; on failure remove everything the plugin registered."""
    plugin = result.manager.get_plugin(cand.name)
    impls = [i for i in getattr(result.manager.hook, hook_name).get_hookimpls() if i.plugin is plugin]
    if not impls:
        return
    registry: Any = {"rumus_register_backends": result.backends, "rumus_register_ops": result.ops,
                     "rumus_register_kernels": result.kernels}[hook_name]
    before = set(result.ops.names())
    try:
        with registry.loading(cand.name):
            _invoke(impls[0].function, impls[0].argnames, registry)
        if hook_name == "rumus_register_ops" and not cand.builtin:
            for op in sorted(set(result.ops.names()) - before):
                validate_schema(result.ops.get(op))
        if hook_name == "rumus_register_kernels" and not cand.builtin:
            validate_kernels(cand.name, result.ops, result.kernels.owned_by(cand.name))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if is_core:
            raise
        for reg in (result.ops, result.kernels, result.backends):
            reg.drop_owner(cand.name)
        result.manager.unregister(name=cand.name)
        _fail(result, cand.name, exc, during=hook_name)


def _invoke(fn: Callable[..., Any], argnames: Sequence[str], registry: Any) -> None:
    fn(*[registry for _ in argnames])  # every hook takes one argument, `registry`, or none


def _fail(result: LoadedPlugins, name: str, exc: BaseException | str, during: str = "") -> None:
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    if during:
        text += f" (in {during})"
    result.failures[name] = text
    warnings.warn(f"rumus: plugin '{name}' failed to load and was skipped: {text}", RuntimeWarning, stacklevel=3)

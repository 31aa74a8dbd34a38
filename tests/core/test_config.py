"""Every RUMUS_* environment variable is declared once in rumus_contracts.config and read through it:
the product's sources read no RUMUS_ variable themselves, name no undeclared one, and every declared
knob is used somewhere; values parse by their declaration, and a bad one is an error naming it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rumus_contracts import RumusError, config
from rumus_contracts.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = [ROOT / "rumus", ROOT / "contracts" / "rumus_contracts", ROOT / "backends",
                ROOT / "conformance" / "rumus_conformance", *sorted(ROOT.glob("plugins/*/rumus_*"))]
THE_TABLE = ROOT / "contracts" / "rumus_contracts" / "config.py"
# Files whose reads another change converts; the coordinator empties this when those changes land.
NOT_YET_CONVERTED: tuple[str, ...] = ()
# RUMUS_* string literals in Python sources that are not environment variables (C macro names that
# the C renderers write out).
NOT_KNOBS = {"RUMUS_AS_IS", "RUMUS_GRAIN_ROWS", "RUMUS_ROW_LANES"}  # C macros of the generated kernels
# The C build scripts run before RUMUS is importable and read their knobs themselves.
BUILD_SCRIPTS = [ROOT / "setup.py", *sorted(ROOT.glob("csrc/build_*.py")), *sorted(ROOT.glob("*/*/csrc/build_*.py"))]
NAME = re.compile(r"RUMUS_[A-Z0-9_]+")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _sources() -> list[Path]:
    out = []
    for root in SOURCE_ROOTS:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).parts
            if "tests" in parts or "benchmarks" in parts or path.name.startswith("build_") or path == THE_TABLE:
                continue
            out.append(path)
    return out


SOURCES = _sources()
TREES = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in SOURCES}


def _knob_constants() -> dict[str, str]:
    """Names bound to a RUMUS_* string anywhere in the sources (`ENV = "RUMUS_..."`, `GEMM_ENV = ...`):
    a read through such a name counts as a read of the variable."""
    out: dict[str, str] = {}
    for tree in TREES.values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:  # NAME = "RUMUS_X" and A, B = "RUMUS_X", "RUMUS_Y"
                pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) \
                    and isinstance(node.value, ast.Tuple) else [(target, node.value)]
                for name, value in pairs:
                    if isinstance(name, ast.Name) and isinstance(value, ast.Constant) \
                            and isinstance(value.value, str) and NAME.fullmatch(value.value):
                        out[name.id] = value.value
    return out


CONSTANTS = _knob_constants()


def _variable(node: ast.AST | None, constants: dict[str, str]) -> str | None:
    """The RUMUS_* variable `node` names: a literal, or a constant bound to one (also as `module.NAME`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
        return node.value
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return constants.get(name) if name is not None else None


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


# Readers that go through rumus_contracts.config themselves, with a per-value cache for the per-op path
# (backends/rumus_wgpu/knobs.py; its own test checks that a changed or bad value is seen).
CONFIG_READERS = {"env_set"}


def _through_config(func: ast.AST) -> bool:
    if isinstance(func, ast.Name) and func.id in CONFIG_READERS:
        return True
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "config"


def _reads(tree: ast.AST, constants: dict[str, str] = CONSTANTS) -> list[tuple[int, str]]:
    """(line, variable) of each RUMUS_* read that does not go through rumus_contracts.config."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and not _through_config(node.func):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            env_call = (isinstance(func, ast.Attribute) and _is_environ(func.value)
                        and name in ("get", "setdefault", "pop")) or name == "getenv"
            # `.get("RUMUS_X")` on any mapping (a copy of os.environ), or a helper such as `_env_int(X)`
            if env_call or name == "get" or "env" in name.lower():
                var = _variable(node.args[0], constants)
                if var is not None:
                    found.append((node.lineno, var))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            var = _variable(node.slice, constants)
            if var is not None:  # os.environ["RUMUS_X"] or a copy's; writes (Store) may stay
                found.append((node.lineno, var))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(_is_environ(c) for c in node.comparators):
            var = _variable(node.left, constants)
            if var is not None:
                found.append((node.lineno, var))
    return found


def _literals(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and NAME.fullmatch(n.value)}


def test_the_scan_sees_the_sources_and_recognises_a_read() -> None:
    assert ROOT / "rumus" / "_runtime.py" in TREES and ROOT / "backends" / "rumus_cpu" / "fused.py" in TREES
    assert any("rumus_vision" in str(p) for p in TREES) and THE_TABLE not in TREES
    sample = ast.parse('import os\nX_ENV = "RUMUS_X"\nos.environ.get("RUMUS_A"); os.getenv(X_ENV)\n'
                       '"RUMUS_B" in os.environ; os.environ["RUMUS_C"]; os.environ["RUMUS_D"] = "1"\n'
                       'config.get("RUMUS_E"); env.get("RUMUS_F"); _int_env("RUMUS_G")\n')
    found = sorted(v for _, v in _reads(sample, {**CONSTANTS, "X_ENV": "RUMUS_X"}))
    assert found == ["RUMUS_A", "RUMUS_B", "RUMUS_C", "RUMUS_F", "RUMUS_G", "RUMUS_X"]


def test_no_source_reads_a_rumus_variable_itself() -> None:
    bad = [f"{_rel(path)}:{line}: {var}" for path, tree in TREES.items()
           if not _rel(path).startswith(NOT_YET_CONVERTED) for line, var in _reads(tree)]
    assert not bad, "read these through rumus_contracts.config (config.get/flag/integer/text/is_set):\n" + \
        "\n".join(bad)


def _declared() -> set[str]:
    from rumus import config as user_view
    return {k.name for k in user_view.knobs()}  # loads the plugins, which declare their own knobs


def test_every_rumus_name_in_the_sources_is_a_declared_knob() -> None:
    declared = _declared()
    bad = [f"{_rel(path)}: {name}" for path, tree in TREES.items() for name in sorted(_literals(tree))
           if name not in declared and name not in NOT_KNOBS]
    assert not bad, "declare these in rumus_contracts/config.py (or a plugin's module), or list a name that " \
        "is not an environment variable in NOT_KNOBS:\n" + "\n".join(bad)


def test_no_declared_knob_is_dead() -> None:
    """A knob nothing reads is removed with its declaration and every mention."""
    mentioned: set[str] = set().union(*(_literals(tree) for tree in TREES.values()))
    for script in BUILD_SCRIPTS:
        if script.exists():
            mentioned |= set(NAME.findall(script.read_text(encoding="utf-8")))
    dead = sorted(_declared() - mentioned)
    assert not dead, f"declared but read nowhere: {dead}"
    assert not NOT_KNOBS & _declared()


def test_flags_read_the_usual_words(monkeypatch: pytest.MonkeyPatch) -> None:
    for word in config.TRUE_WORDS + ("YES", " On "):
        monkeypatch.setenv("RUMUS_TRACEBACK", word)
        assert config.flag("RUMUS_TRACEBACK") is True, word
    for word in config.FALSE_WORDS + ("No", "OFF"):
        monkeypatch.setenv("RUMUS_COMPILE", word)
        assert config.flag("RUMUS_COMPILE") is (word == ""), word  # empty: the default, which is on
    monkeypatch.setenv("RUMUS_COMPILE", "maybe")
    with pytest.raises(ConfigError, match=r"RUMUS_COMPILE='maybe' is not a yes/no value"):
        config.flag("RUMUS_COMPILE")


def test_choices_are_case_blind_and_a_typo_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_DIST_DEVICE", "WGPU")
    assert config.text("RUMUS_DIST_DEVICE") == "wgpu"
    monkeypatch.setenv("RUMUS_DIST_DEVICE", "cuda")
    with pytest.raises(ConfigError, match=r"RUMUS_DIST_DEVICE='cuda' is not one of cpu, wgpu"):
        config.get("RUMUS_DIST_DEVICE")
    monkeypatch.delenv("RUMUS_QUANT_ISA", raising=False)
    assert config.get("RUMUS_QUANT_ISA") is None and not config.is_set("RUMUS_QUANT_ISA")


def test_numbers_keep_their_least_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_NUM_THREADS", " 4 ")
    assert config.integer("RUMUS_NUM_THREADS") == 4 and config.is_set("RUMUS_NUM_THREADS")
    for raw in ("0", "-2", "four", "2.5"):
        monkeypatch.setenv("RUMUS_NUM_THREADS", raw)
        with pytest.raises(ConfigError, match=rf"RUMUS_NUM_THREADS='{re.escape(raw)}' is not an integer >= 1"):
            config.get("RUMUS_NUM_THREADS")
    for raw in ("nan", "-1", "lots"):
        monkeypatch.setenv("RUMUS_WGPU_POOL_CACHE_MB", raw)
        with pytest.raises(ConfigError, match=r"RUMUS_WGPU_POOL_CACHE_MB=.* is not a number >= 0"):
            config.get("RUMUS_WGPU_POOL_CACHE_MB")
    monkeypatch.setenv("RUMUS_WGPU_POOL_CACHE_MB", "0.5")
    assert config.get("RUMUS_WGPU_POOL_CACHE_MB") == 0.5


def test_config_error_is_a_value_error_and_undeclared_names_are_refused() -> None:
    assert issubclass(ConfigError, RumusError) and issubclass(ConfigError, ValueError)
    with pytest.raises(ConfigError, match="RUMUS_NO_SUCH_KNOB is not a declared knob"):
        config.get("RUMUS_NO_SUCH_KNOB")
    with pytest.raises(ConfigError, match="named RUMUS_"):
        config.declare("OTHER_KNOB", "flag", False, "x", owner="test")
    knob = config.KNOBS["RUMUS_TRACEBACK"]
    assert config.declare(knob.name, knob.kind, knob.default, knob.doc, owner=knob.owner, user=knob.user) == knob
    with pytest.raises(ConfigError, match="declared twice"):
        config.declare(knob.name, "int", 0, knob.doc, owner="someone-else")


def test_a_bad_plugin_setting_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from rumus_contracts.plugins import discover
    monkeypatch.setenv("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "sometimes")
    with pytest.raises(ConfigError, match="RUMUS_DISABLE_PLUGIN_AUTOLOAD='sometimes'"):
        discover()


def test_rm_compile_reads_its_switch_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    import rumus as rm
    monkeypatch.setenv("RUMUS_COMPILE", "off")
    assert rm.compile(lambda x: x).off
    monkeypatch.setenv("RUMUS_COMPILE", "")
    assert not rm.compile(lambda x: x).off


def test_the_docs_page_is_generated_from_the_table() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RUMUS_PLUGINS", "RUMUS_DISABLE_PLUGIN_AUTOLOAD")}
    made = subprocess.run([sys.executable, "-m", "rumus.config", "--markdown"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    page = (ROOT / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    assert page == made.stdout, "regenerate it: python -m rumus.config --markdown > docs/CONFIG.md"
    for name in ("RUMUS_BACKEND", "RUMUS_VISION_CONV", "RUMUS_GRAPH_SPMM_CHUNK"):
        assert f"| `{name}` |" in page

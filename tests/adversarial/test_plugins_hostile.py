"""Hostile plugins (issue 20 item 5): each is loaded next to the core and the built-in backends, and
must be refused with its own name while the core keeps its ops, kernels and backends.

In-process tests use `backend_api.load_fresh`, the loader the process itself uses, on the fixture
modules in hostile_plugins/; the subprocess tests install a plugin as a real entry point and check
that `import rumus` then still works end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from fake_plugin import install_fake_plugin

import rumus as rm
from rumus import backend_api
from rumus_contracts import Candidate, LoadedPlugins, float32

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _hostile_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "1")  # only the core, built-ins and the fixtures


def load(*modules: str) -> LoadedPlugins:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = backend_api.load_fresh([Candidate(m, f"hostile_plugins.{m}", False) for m in modules])
    for m in modules:  # every refusal is also a warning that names the plugin
        if m in loaded.failures:
            assert any(f"'{m}'" in str(w.message) for w in caught), m
    return loaded


def assert_core_intact(loaded: LoadedPlugins) -> None:
    assert loaded.ops.owner["add"] == "rumus-core" and loaded.ops.owner["fill"] == "rumus-core"
    assert loaded.backends.owner["cpu"] == "cpu"
    assert loaded.kernels.find_entry("add", "cpu", float32).owner == "cpu"
    assert loaded.kernels.find_entry("neg", "cpu", float32).owner == "cpu"
    assert not {"cpu", "rumus-core"} & set(loaded.failures)


def test_system_exit_at_import_is_contained():
    loaded = load("exit_at_import")
    assert loaded.failures["exit_at_import"].startswith("SystemExit: 3")
    assert_core_intact(loaded)


def test_keyboard_interrupt_is_not_swallowed():
    # documented choice: Ctrl-C during a slow plugin import must still stop the process
    with pytest.raises(KeyboardInterrupt):
        load("keyboard_interrupt_at_import")


def test_system_exit_in_a_hook_rolls_back_what_the_plugin_registered():
    loaded = load("exit_in_hook")
    assert "SystemExit: bye (in rumus_register_kernels)" in loaded.failures["exit_in_hook"]
    assert "exit_in_hook_op" not in loaded.ops  # registered by its ops hook, removed with the plugin
    assert "exit_in_hook" not in loaded.loaded
    assert_core_intact(loaded)


def test_registering_a_core_op_name_is_refused_with_both_names():
    loaded = load("steal_add")
    msg = loaded.failures["steal_add"]
    assert "op 'add'" in msg and "'rumus-core'" in msg and "'steal_add'" in msg
    assert "steal_add_extra" not in loaded.ops
    assert_core_intact(loaded)


# (plugin, what its failure must say): the plugin is refused alone, the core stays whole
REFUSED = [
    pytest.param("base_exception_at_import", ["Doom: the plugin's import went very wrong"],
                 id="base-exception-subclass-at-import-is-contained"),
    pytest.param("steal_add_tryfirst", ["op 'fill'"], id="tryfirst-does-not-register-before-the-core"),
    pytest.param("shadow_kernel", ["'neg'", "'cpu'", "'shadow_kernel'", "priority=1"],
                 id="same-priority-kernel-for-a-core-op-is-refused-with-both-names"),
]


@pytest.mark.parametrize(("plugin", "says"), REFUSED)
def test_a_failing_plugin_is_refused_alone(plugin: str, says: list[str]) -> None:
    loaded = load(plugin)
    for part in says:
        assert part in loaded.failures[plugin], (part, loaded.failures[plugin])
    assert_core_intact(loaded)


def test_explicit_priority_overrides_a_builtin_kernel():
    loaded = load("override_kernel")
    assert "override_kernel" in loaded.loaded and not loaded.failures
    entry = loaded.kernels.find_entry("neg", "cpu", float32)
    assert entry.owner == "override_kernel" and entry.priority == 5
    assert loaded.kernels.find_entry("neg", "wgpu", float32).owner == "wgpu"  # other backends untouched


def test_two_plugins_at_the_same_override_priority_are_refused_naming_both():
    loaded = load("override_kernel", "override_kernel_rival")
    msg = loaded.failures["override_kernel_rival"]
    assert "'override_kernel'" in msg and "'override_kernel_rival'" in msg and "priority 5" in msg
    assert loaded.kernels.find_entry("neg", "cpu", float32).owner == "override_kernel"


def test_kernel_with_a_wrong_signature_is_refused_at_load():
    loaded = load("bad_signature")
    msg = loaded.failures["bad_signature"]
    assert "kernel(outputs, inputs, attrs)" in msg and "(x)" in msg
    assert "bad_signature_op" not in loaded.ops
    assert_core_intact(loaded)


def test_schema_whose_shape_rule_raises_is_refused_at_load():
    loaded = load("bad_shape_rule")
    msg = loaded.failures["bad_shape_rule"]
    assert "op 'bad_shape_op'" in msg and "shape rule raised IndexError" in msg
    assert "bad_shape_op" not in loaded.ops


def test_a_plugin_cannot_take_a_builtin_backend_name():
    loaded = load("steal_backend")
    assert "backend 'cpu'" in loaded.failures["steal_backend"] and "'steal_backend'" in loaded.failures["steal_backend"]
    assert_core_intact(loaded)


def test_a_plugin_cannot_register_on_behalf_of_the_core():
    loaded = load("impersonate")
    assert "'impersonate' tried to register as 'rumus-core'" in loaded.failures["impersonate"]
    assert "impersonated_op" not in loaded.ops


def test_misspelled_hook_and_hook_wrappers_are_refused():
    loaded = load("typo_hook", "wrapper_hook")
    assert "rumus_register_kernel" in loaded.failures["typo_hook"]
    assert "wrapper" in loaded.failures["wrapper_hook"]
    assert_core_intact(loaded)


def test_all_hostile_plugins_at_once_leave_a_working_core():
    modules = sorted(p.stem for p in (HERE / "hostile_plugins").glob("*.py")
                     if not p.stem.startswith("_") and p.stem != "keyboard_interrupt_at_import")
    assert len(modules) >= 14
    loaded = load(*modules)
    assert set(loaded.failures) == set(modules) - {"override_kernel"}  # the one legitimate override loads
    assert loaded.kernels.find_entry("neg", "cpu", float32).owner == "override_kernel"
    assert loaded.ops.owner["add"] == "rumus-core" and loaded.backends.owner["cpu"] == "cpu"


# ---- end to end: a real entry point, then `import rumus` and tensor ops --------------------------

def _run(code: str, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, str(HERE), *sys.path])}
    env.pop("RUMUS_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)


CHECK = ("import rumus as rm; from rumus import backend_api as api; p = api.plugins(); "
         "print(sorted(p.failures)); print((rm.ones(2) + 1).tolist(), rm.neg(rm.ones(1)).tolist())")


def test_installed_plugin_stealing_add_leaves_rumus_usable(tmp_path: Path):
    path = install_fake_plugin(tmp_path, "evil", "from hostile_plugins.steal_add import *\n")
    out = _run(CHECK, path)
    assert out.returncode == 0, out.stderr
    assert "['evil']" in out.stdout and "[2.0, 2.0] [-1.0]" in out.stdout
    assert "plugin 'evil' failed to load" in out.stderr and "op 'add'" in out.stderr


def test_installed_plugin_calling_sys_exit_at_import_leaves_rumus_usable(tmp_path: Path):
    path = install_fake_plugin(tmp_path, "quitter", "import sys\nsys.exit(4)\n")
    out = _run(CHECK, path)
    assert out.returncode == 0, out.stderr
    assert "['quitter']" in out.stdout and "[2.0, 2.0] [-1.0]" in out.stdout


def test_installed_override_is_used_by_the_dispatcher(tmp_path: Path):
    src = """
    from rumus_contracts import hookimpl
    import numpy as np
    def neg_plus_100(outputs, inputs, attrs):  # visibly not the built-in kernel
        (out,), (x,) = outputs, inputs
        n = x.numel
        np.subtract(100.0, x.buffer[x.offset:x.offset + n], out=out.buffer[out.offset:out.offset + n])
    @hookimpl
    def rumus_register_kernels(registry):
        registry.register("neg", "cpu", neg_plus_100, priority=1)
    """
    path = install_fake_plugin(tmp_path, "fastneg", src)
    out = _run(CHECK, path)
    assert out.returncode == 0, out.stderr
    assert "[]" in out.stdout and "[2.0, 2.0] [99.0]" in out.stdout


def test_core_ops_work_in_this_process():
    # the hostile loads above are independent of the process's own registries
    assert backend_api.plugins().ops.owner["add"] == "rumus-core"
    np.testing.assert_array_equal(rm.neg(rm.ones(2)).numpy(), [-1.0, -1.0])


def test_installed_plugin_reusing_a_builtin_entry_point_name_is_refused(tmp_path: Path):
    # a third-party distribution whose entry point is called "cpu" must not replace the built-in backend
    path = install_fake_plugin(tmp_path, "cpu", "from hostile_plugins.steal_backend import *\n")
    out = _run(CHECK + "; print(api.plugins().backends.owner['cpu'], type(api.backend('cpu')).__name__)", path)
    assert out.returncode == 0, out.stderr
    assert "['cpu (cpu_mod)']" in out.stdout and "[2.0, 2.0] [-1.0]" in out.stdout
    assert "cpu CpuBackend" in out.stdout
    assert "entry-point name 'cpu' is taken by 'rumus_cpu.plugin'" in out.stderr

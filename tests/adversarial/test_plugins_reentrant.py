"""A plugin that calls backend_api from inside its hooks, installed as a real entry point and loaded by
the process's own first use (in a subprocess with a timeout: a non-reentrant lock used to hang it
forever). Reading schemas works on the registries loaded so far; running an op during loading is a
clear RumusError; afterwards everything, the plugin's op included, works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_plugin import install_fake_plugin

HERE = Path(__file__).parent

CHECK = """
import json
import rumus as rm
from rumus import backend_api as api
from hostile_plugins.reentrant_hooks import SEEN
p = api.plugins()
out = rm.ops.reentrant_op(rm.ones(3)).tolist()
print(json.dumps({"failures": sorted(p.failures), "seen": {k: str(v) for k, v in SEEN.items()}, "out": out}))
"""


def test_backend_api_inside_hooks_neither_hangs_nor_fails(tmp_path: Path) -> None:
    path = install_fake_plugin(tmp_path, "reentrant", "from hostile_plugins.reentrant_hooks import *\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, str(HERE), *sys.path])}
    env.pop("RUMUS_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["failures"] == [], res
    seen = res["seen"]
    assert seen["add_inputs"] == "('a', 'b')" and seen["plugins_is_partial"] == "True", seen
    assert seen["own_schema"] == "reentrant_op", seen
    assert "while the plugins are still loading" in seen["running_an_op"], seen
    assert res["out"] == [-1.0, -1.0, -1.0]


IMPORT_ONLY = """
import json, sys
import rumus
from rumus import _runtime
print(json.dumps({"loaded": _runtime._loaded is not None, "cpu_lib": "rumus_cpu._lib" in sys.modules,
                  "gomp": any("libgomp" in line for line in open("/proc/self/maps"))}))
from rumus import backend_api as api
api.plugins()
from rumus_cpu import threads
print(json.dumps({"changes": threads.process_changes()}))
rumus.zeros(1)
print(json.dumps({"changes": threads.process_changes()}))
"""


def test_import_and_plugin_loading_change_nothing_process_wide() -> None:
    """`import rumus` loads no plugin and changes nothing; loading the plugins loads libgomp with a short
    spin (before any plugin's OpenMP extension could load it with the long default) and nothing else;
    malloc and OpenBLAS change when the cpu backend is created."""
    if not os.path.exists("/proc/self/maps"):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["RUMUS_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run([sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, loaded, started = (json.loads(line) for line in proc.stdout.strip().splitlines()[-3:])
    assert first == {"loaded": False, "cpu_lib": False, "gomp": False}, first
    assert all(c.startswith("libgomp") for c in loaded["changes"]), loaded
    assert any(c.startswith("malloc") for c in started["changes"]), started
    assert any(c.startswith("OpenBLAS") for c in started["changes"]), started

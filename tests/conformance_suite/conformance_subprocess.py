"""Running `rumus conformance` in a subprocess, with fake plugins installed as entry points, and reading
its --json result: each test gets its own plugin load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_plugin import install_fake_plugin

# strided numpy views of the CPU backend's flat buffers, for plugin kernels that must honour strides
VIEW = """
import numpy as np

def view(t):
    b = t.buffer
    return np.lib.stride_tricks.as_strided(b[t.offset:], t.shape, tuple(s * b.itemsize for s in t.strides))
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any]

    def cell(self, op: str, dtype: str, check: str) -> dict[str, Any]:
        hits = [c for c in self.result["cells"] if (c["op"], c["dtype"], c["check"]) == (op, dtype, check)]
        assert len(hits) == 1, f"{op} {dtype} {check}: {len(hits)} cells in the JSON\n{self.stdout[-3000:]}"
        return hits[0]

    def row(self, op: str) -> list[str]:
        """The matrix row of `op` as labels by column header."""
        lines = self.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("backend: "))
        header = lines[start + 1].split()
        row = next(line.split() for line in lines[start + 2:] if line.split() and line.split()[0] == op)
        return [f"{h}={v}" for h, v in zip(header[1:], row[1:])]


def install(tmp_path: Path, name: str, source: str) -> str:
    return install_fake_plugin(tmp_path, name, source)


def conformance(path: str | None, tmp_path: Path, *args: str, k: str, pre: str = "") -> Run:
    """`rumus conformance --backend cpu -k K --json FILE ARGS` with the plugins under `path` installed,
    after running `pre` in the same process."""
    out = tmp_path / f"result-{len(list(tmp_path.glob('result-*.json')))}.json"
    code = (f"import sys\n{pre}\nfrom rumus_conformance.runner import main\n"
            f"sys.exit(main(['--backend', 'cpu', '-k', {k!r}, '--json', {str(out)!r}, *{list(args)!r}]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*([path] if path else []), *sys.path]),
           "RUMUS_BACKEND": "cpu"}
    for key in ("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "RUMUS_PLUGINS", "RUMUS_CONFORMANCE_XFAILS"):
        env.pop(key, None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    result = json.loads(out.read_text()) if out.exists() else {}
    assert result, proc.stdout[-3000:] + proc.stderr[-3000:]
    return Run(proc.returncode, proc.stdout, proc.stderr, result)

"""The package is discovered exactly like a third-party plugin: entry point, ops, kernels, `rumus info`."""

from __future__ import annotations

import os
import subprocess
import sys

import rumus as rm
from rumus import backend_api

OPS = ["graph_edge_softmax", "graph_sddmm", "graph_segment_argmax", "graph_segment_expand", "graph_segment_max",
       "graph_segment_mean", "graph_segment_sum", "graph_spmm", "graph_spmm_t"]


def test_loaded_whole_through_the_entry_point() -> None:
    loaded = backend_api.plugins()
    assert "graph" in loaded.loaded
    assert "graph" not in loaded.failures and "graph" not in loaded.problems, loaded.all_failures()
    for op in OPS:
        assert loaded.ops.owner[op] == "graph"
        for backend in ("cpu", "wgpu"):
            entry = loaded.kernels.find_entry(op, backend, rm.float32)
            assert entry is not None and entry.owner == "graph", (op, backend)
        assert loaded.kernels.find_entry(op, "cpu", rm.float64) is not None
        assert loaded.kernels.find_entry(op, "wgpu", rm.float64) is None  # WebGPU holds no float64


def test_a_fresh_load_validates_it() -> None:
    """The loader's validation (shape/dtype rules on the op's own samples, kernel signatures) accepts it."""
    fresh = backend_api.load_fresh()
    assert "graph" in fresh.loaded and not fresh.all_failures(), fresh.all_failures()
    assert fresh.ops.get("graph_spmm").backward is not None


def test_rumus_info_lists_it() -> None:
    out = subprocess.run([sys.executable, "-m", "rumus", "info"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "RUMUS_BACKEND": "cpu"})
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("plugins loaded:"))
    assert "graph" in line.split(":", 1)[1].replace(",", " ").split(), line
    assert "FAILED" not in out.stdout, out.stdout


def test_core_works_without_it() -> None:
    """RUMUS_PLUGINS selects third-party plugins: without this one the core still runs, and its ops are gone."""
    code = ("import rumus as rm; from rumus import backend_api as a; p = a.plugins(); "
            "assert 'graph' not in p.loaded and 'graph_spmm' not in p.ops, p.loaded; "
            "x = rm.randn(4, 3, requires_grad=True); (x @ x.T).sum().backward(); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "RUMUS_PLUGINS": "hello", "RUMUS_BACKEND": "cpu"})
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr

"""The WGSL spmm has two thread layouts (1 feature per invocation on GPUs, 16 on CPU rasterizers); CI's
lavapipe picks 16 (which CI's conformance run covers), so the GPU layout is forced here and checked by
the same conformance suite."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SPMM_LAYOUT_ENV = "RUMUS_GRAPH_SPMM_CHUNK"


def test_the_gpu_spmm_layout_passes_conformance(device: str) -> None:
    if device != "wgpu":
        pytest.skip("a WebGPU kernel layout")
    env = {**os.environ, SPMM_LAYOUT_ENV: "1", "RUMUS_BACKEND": "wgpu"}
    out = subprocess.run([sys.executable, "-m", "rumus", "conformance", "--backend", "wgpu", "-q", "-k",
                          "graph_spmm or graph_sddmm"], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = {ln.split()[0]: ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("graph_")}
    assert rows == {"graph_sddmm": "ok", "graph_spmm": "ok", "graph_spmm_t": "ok"}, out.stdout[-2000:]


def test_a_bad_layout_setting_is_refused() -> None:
    code = "from rumus_graph.wgpu_kernels import spmm_chunk; spmm_chunk()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, SPMM_LAYOUT_ENV: "8"})
    assert out.returncode != 0 and "ConfigError: RUMUS_GRAPH_SPMM_CHUNK='8' is not one of 1, 16" in out.stderr

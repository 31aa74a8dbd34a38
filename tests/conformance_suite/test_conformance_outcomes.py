"""Conformance outcomes come from structured results: a wrong kernel is FAIL with its worst error (never
MISSING), a composite whose primitive is absent is MISSING naming that primitive, and the matrix ranks
the missing primitives. Each case runs the real command in a subprocess on a few ops (-k)."""

from __future__ import annotations

from pathlib import Path

from conformance_subprocess import VIEW, conformance, install

# a third party's CPU kernels at a higher priority than the built-in ones, each 1% off
WRONG = VIEW + """
from rumus_contracts import hookimpl, float32, float64

def exp_1pct(outputs, inputs, attrs):
    view(outputs[0])[...] = np.exp(view(inputs[0])) * 1.01

def relu_backward_1pct(outputs, inputs, attrs):
    grad, x = (view(t) for t in inputs)
    view(outputs[0])[...] = np.where(x > 0, grad, 0) * 1.01

@hookimpl
def rumus_register_kernels(registry):
    registry.register("exp", "cpu", exp_1pct, dtypes=[float32, float64], priority=1)
    registry.register("relu_backward", "cpu", relu_backward_1pct, dtypes=[float32, float64], priority=1)
"""


def test_a_wrong_kernel_at_higher_priority_fails_its_cells_with_the_worst_error(tmp_path: Path):
    run = conformance(install(tmp_path, "wrongexp", WRONG), tmp_path, k="[exp- or [relu_backward- or [relu-")
    assert run.returncode != 0
    assert run.row("exp")[:4] == ["f32=FAIL", "f64=FAIL", "f16=ok", "bf16=ok"]
    assert run.row("relu_backward")[:2] == ["f32=FAIL", "f64=FAIL"]
    for op, checks in (("exp", ("forward", "noncontiguous", "gradient")), ("relu_backward", ("forward",))):
        for dtype in ("float32", "float64"):
            for check in checks:
                cell = run.cell(op, dtype, check)
                assert cell["outcome"] == "FAIL", cell
                assert cell["missing_primitives"] == [] and cell["sample"], cell
                assert cell["samples_failed"] >= 1 and cell["samples_ran"] >= cell["samples_failed"]
    worst = run.cell("exp", "float32", "forward")["worst_error"]
    assert abs(worst["rel"] - 0.01) < 1e-4 and worst["ratio"] > 1, worst  # the kernel's 1%, found as the worst
    # relu's own kernel is right; its gradient runs the wrong relu_backward
    assert run.cell("relu", "float32", "forward")["outcome"] == "ok-kernel"
    assert run.cell("relu", "float32", "gradient")["outcome"] == "FAIL"
    assert run.cell("exp", "float16", "forward")["outcome"] == "ok-kernel"
    assert not any(c["outcome"] == "MISSING" for c in run.result["cells"])
    assert "MISS" not in "".join(run.row("exp") + run.row("relu_backward"))
    assert "FAIL exp float32 forward: " in run.stdout and "rel 0.01" in run.stdout


# the CPU backend without its float32 amax kernel, as a backend missing one primitive would be
DROP_AMAX = """
from dataclasses import replace
from rumus import backend_api as api
from rumus_contracts import float32
reg = api.plugins().kernels
reg._entries[("amax", "cpu")] = [replace(e, dtypes=e.dtypes - {float32}) for e in reg.entries("amax", "cpu")]
reg._entries[("logsumexp", "cpu")] = []  # its fused row kernel: the composite runs, over amax and the rest
reg._cache.clear()
"""
# the cpu backend's fused logsumexp left out, so logsumexp runs as the composite it is declared
NO_FUSED_LOGSUMEXP = """
from rumus import backend_api as api
reg = api.plugins().kernels
reg._entries[("logsumexp", "cpu")] = []
reg._cache.clear()
"""


def test_a_composite_whose_primitive_is_missing_names_it(tmp_path: Path):
    run = conformance(None, tmp_path, k="[logsumexp- or [amax-", pre=DROP_AMAX)
    assert run.returncode != 0
    for check in ("forward", "noncontiguous", "gradient"):
        cell = run.cell("logsumexp", "float32", check)
        assert cell["outcome"] == "MISSING" and cell["missing_primitives"] == ["amax"], cell
    assert run.cell("amax", "float32", "forward")["missing_primitives"] == ["amax"]
    # the float64 cells still run the composite over the backend's kernels
    assert run.cell("logsumexp", "float64", "forward")["outcome"] == "ok-decomposed"
    assert run.cell("amax", "float64", "forward")["outcome"] == "ok-kernel"
    assert run.row("logsumexp")[:2] == ["f32=MISS", "f64=dec"]
    ranked = run.result["missing_primitives"]
    assert ranked[0]["op"] == "amax" and set(ranked[0]["unlocks"]) >= {"logsumexp/float32", "amax/float32"}
    lines = run.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("missing primitives, ranked"))
    assert lines[head + 1].split()[:2] == ["amax", str(ranked[0]["cells"])]
    assert "MISS logsumexp float32 forward: no kernel for amax" in run.stdout


def test_a_healthy_run_counts_kernels_and_decompositions_apart(tmp_path: Path):
    run = conformance(None, tmp_path, k="[logsumexp-float64 or [exp-float64", pre=NO_FUSED_LOGSUMEXP)
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.cell("exp", "float64", "forward")["route"] == "kernel"
    assert run.cell("logsumexp", "float64", "forward")["route"] == "composite"
    assert run.result["counts"] == {"ok-kernel": 3, "ok-decomposed": 3}

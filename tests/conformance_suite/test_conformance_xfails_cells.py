"""Known gaps name cells (op, dtype, check): an op's name covers its value checks but never its
error-input test, a listed cell that passes is XPASS (and fails the run), and `--write-xfails`
writes exactly the failing cells, so the next run with that file passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance_subprocess import VIEW, conformance, install
from rumus_contracts import RumusError
from rumus_conformance import xfails
from rumus_conformance.outcomes import FAIL, MISSING, OK_KERNEL, XFAIL, XPASS, CellResult, Mismatch

# fakeneg: -x, with error inputs (a 0-d input) that the shape rule refuses; each dtype's kernel is
# off by its own factor (1.0: right)
PLUGIN = VIEW + """
from rumus_contracts import ErrorSample, OpSchema, Sample, ShapeError, hookimpl, float32, float64

def shape(shapes, attrs):
    if len(shapes[0]) == 0:
        raise ShapeError("fakeneg needs at least one dim")
    return [tuple(shapes[0])]

def samples(rng):
    return [Sample([rng.uniform(-1, 1, (3, 4))], name="3x4"), Sample([rng.uniform(-1, 1, (5,))], name="5")]

def errors():
    return [ErrorSample([np.float64(1.0)], {}, ShapeError, "at least one dim")]

def kernel(factor):
    def run(outputs, inputs, attrs):
        view(outputs[0])[...] = -view(inputs[0]) * factor
    return run

@hookimpl
def rumus_register_ops(registry):
    registry.register(OpSchema("fakeneg", ("x",), shape, dtypes=(float32, float64), reference=lambda x: -x,
                               samples=samples, error_samples=errors))

@hookimpl
def rumus_register_kernels(registry):
    registry.register("fakeneg", "cpu", kernel(F32), dtypes=[float32])
    registry.register("fakeneg", "cpu", kernel(F64), dtypes=[float64])
"""


def _plugin(tmp_path: Path, f32: float = 1.0, f64: float = 1.0) -> str:
    folder = tmp_path / f"plugin-{f32}-{f64}"
    folder.mkdir()
    return install(folder, "fakeneg", PLUGIN.replace("F32", repr(f32)).replace("F64", repr(f64)))


def test_an_op_name_covers_its_value_checks_but_not_its_error_inputs(tmp_path: Path):
    gaps = tmp_path / "gaps.txt"
    gaps.write_text("fakeneg   # every value check fails: both kernels are 1% off\n")
    run = conformance(_plugin(tmp_path, 1.01, 1.01), tmp_path, "--xfails", str(gaps), k="fakeneg")
    assert run.returncode == 0, run.stdout[-3000:]
    for dtype in ("float32", "float64"):
        for check in ("forward", "noncontiguous"):
            cell = run.cell("fakeneg", dtype, check)
            assert (cell["outcome"], cell["underlying"], cell["listed_at"]) == ("xfail", "FAIL", f"{gaps}:1")
            assert cell["worst_error"]["rel"] == pytest.approx(0.01, abs=1e-6)
    errors = run.cell("fakeneg", "-", "errors")
    assert errors["outcome"] == "ok-kernel" and errors["listed_at"] is None  # ran, passed, not XPASS
    assert run.row("fakeneg") == ["f32=xf", "f64=xf"]


def test_a_listed_cell_that_passes_is_xpass_and_fails_the_run(tmp_path: Path):
    gaps = tmp_path / "gaps.txt"
    gaps.write_text("fakeneg  float64  forward\n")  # only the float64 kernel is off, and only this cell listed
    run = conformance(_plugin(tmp_path, f64=1.01), tmp_path, "--xfails", str(gaps), k="fakeneg")
    assert run.returncode != 0
    assert run.cell("fakeneg", "float64", "forward")["outcome"] == "xfail"
    assert run.cell("fakeneg", "float64", "noncontiguous")["outcome"] == "FAIL"  # not listed
    assert run.cell("fakeneg", "float32", "forward")["outcome"] == "ok-kernel"

    gaps.write_text("fakeneg  float32  forward\n")  # listed, but that kernel is right
    run = conformance(_plugin(tmp_path), tmp_path, "--xfails", str(gaps), k="fakeneg")
    assert run.returncode != 0
    cell = run.cell("fakeneg", "float32", "forward")
    assert (cell["outcome"], cell["underlying"]) == ("XPASS", "ok-kernel")
    assert run.cell("fakeneg", "float32", "noncontiguous")["outcome"] == "ok-kernel"
    assert run.row("fakeneg") == ["f32=XPAS", "f64=ok"]
    assert "XPAS fakeneg float32 forward: listed at" in run.stdout


def test_write_xfails_round_trips(tmp_path: Path):
    path = _plugin(tmp_path, f64=1.01)
    written = tmp_path / "written.txt"
    first = conformance(path, tmp_path, "--write-xfails", str(written), k="fakeneg")
    assert first.returncode != 0
    failing = {(c["op"], c["dtype"], c["check"]) for c in first.result["cells"] if c["outcome"] == "FAIL"}
    assert failing == {("fakeneg", "float64", "forward"), ("fakeneg", "float64", "noncontiguous")}
    assert set(xfails.load(str(written)).cells) == failing  # exactly the failing cells, nothing wider
    second = conformance(path, tmp_path, "--xfails", str(written), k="fakeneg")
    assert second.returncode == 0, second.stdout[-3000:]
    assert {(c["op"], c["dtype"], c["check"]) for c in second.result["cells"] if c["outcome"] == "xfail"} == failing


def test_entry_forms(tmp_path: Path):
    gaps = tmp_path / "gaps.txt"
    gaps.write_text("# comment\n"
                    "a  float32  forward   # one check\n"
                    "b  int64    *\n"
                    "c  *        gradient\n"
                    "d  *        *\n"
                    "d  -        errors\n"
                    "test_forward[e-float16]\n"
                    "f-bfloat16\n"
                    "g\n"
                    "test_xor_converges\n")
    x = xfails.load(str(gaps))
    assert x.match(("a", "float32", "forward")) == f"{gaps}:2"
    assert x.match(("a", "float32", "noncontiguous")) is None
    assert x.match(("b", "int64", "gradient")) == f"{gaps}:3" and x.match(("b", "int32", "forward")) is None
    assert x.match(("c", "fixed_i16(3)", "gradient")) and not x.match(("c", "float32", "forward"))
    assert x.match(("d", "float64", "noncontiguous")) == f"{gaps}:5"
    assert x.match(("d", "-", "errors")) == f"{gaps}:6"  # only by its own line
    assert x.match(("g", "float32", "forward")) and x.match(("g", "-", "errors")) is None
    assert x.match(("e", "float16", "forward")) and not x.match(("e", "float16", "gradient"))
    assert x.match(("f", "bfloat16", "gradient"))
    assert x.match_test("test_xor_converges") == f"{gaps}:10"
    assert x.unused() == []


@pytest.mark.parametrize("line", ["add float32", "add float32 backward", "add - forward", "add float32 errors",
                                  "add float32 forward extra", "add!"])
def test_malformed_entries_are_refused(tmp_path: Path, line: str):
    gaps = tmp_path / "gaps.txt"
    gaps.write_text(line + "\n")
    with pytest.raises(RumusError, match="is not an xfails entry"):
        xfails.load(str(gaps))


def test_render_writes_only_gaps_one_cell_a_line():
    cells = [CellResult("add", "float32", "forward", OK_KERNEL),
             CellResult("add", "float64", "gradient", FAIL, worst=Mismatch("d/dx: 1 of 4 elements differ"),
                        sample="4: inputs (4)", failed=1, ran=3),
             CellResult("lse", "float32", "forward", MISSING, missing=("amax",)),
             # listed and still failing: kept, so writing from a run with the file keeps its entries
             CellResult("mul", "int8", "forward", XFAIL, worst=Mismatch("output 0: 1 of 2 elements differ"), failed=1,
                        ran=2, underlying=FAIL),
             CellResult("sub", "int8", "forward", XPASS, underlying=OK_KERNEL),  # passed: dropped
             CellResult("neg", "-", "errors", FAIL, worst=Mismatch("accepted bad input"), failed=1, ran=1,
                        detail="accepted bad input")]
    text = xfails.render(cells, "header")
    body = [line.split("#")[0].split() for line in text.splitlines() if not line.startswith("#")]
    assert body == [["add", "float64", "gradient"], ["lse", "float32", "forward"], ["mul", "int8", "forward"],
                    ["neg", "-", "errors"]]
    assert "# MISSING: no kernel for amax" in text and "1 of 3 samples failed" in text

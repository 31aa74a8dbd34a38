"""benchmarks/RESULTS.md is generated from benchmarks/results/*.json: one row per benchmark, every field
filled in, and the checked-in table is what the generator writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_table", ROOT / "benchmarks" / "results_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_md_is_the_generated_table() -> None:
    gen = _generator()
    rows = gen.load_results()
    assert len(rows) >= 10 and len({r["benchmark"] for r in rows}) == len(rows)
    assert (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8") == gen.render(rows), \
        "run python benchmarks/results_table.py"


def test_a_result_file_without_a_field_is_refused(tmp_path: Path) -> None:
    gen = _generator()
    (tmp_path / "x.json").write_text(json.dumps({"benchmark": "x", "what": "w", "rumus": "1 ms"}))
    with pytest.raises(ValueError, match="missing reference, ratio, date, machine, command, commit"):
        gen.load_results(tmp_path)


def test_record_replaces_the_benchmarks_file_and_the_table_shows_it(tmp_path: Path) -> None:
    gen = _generator()
    for figure in ("2 ms", "1 ms"):
        gen.record("demo-step", "demo step", figure, "torch 1 ms", "1×", "dev", "python x.py", directory=tmp_path)
    rows = gen.load_results(tmp_path)
    assert [r["rumus"] for r in rows] == ["1 ms"] and rows[0]["commit"]
    assert "| `demo-step` | demo step | 1 ms |" in gen.render(rows)


def test_ratio_text_says_which_way_and_by_how_much() -> None:
    gen = _generator()
    assert gen.ratio_text(2.2, 2.0) == "1.10× slower"
    assert gen.ratio_text(1.0, 2.5) == "2.50× faster"
    assert gen.ratio_text(1.001, 1.0) == "same"
    assert gen.ratio_text(40.0, 20.0, higher_is_better=True) == "2.00× faster"  # GFLOP/s, not seconds
    assert gen.ratio_text(0.0, 1.0) == "-"


def test_record_all_writes_nothing_without_a_machine_and_the_table_with_one(tmp_path: Path) -> None:
    gen = _generator()
    table = tmp_path / "RESULTS.md"
    figures = [("a-step", "a step", "3 ms", "torch 2 ms", "1.50× slower"),
               ("b-op", "b op", "1 µs", "torch 1 µs", "same")]
    gen.record_all(None, "python a.py", figures, directory=tmp_path, table=table)
    assert list(tmp_path.iterdir()) == []
    gen.record_all("dev", "python a.py", figures, directory=tmp_path, table=table)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["a-step.json", "b-op.json"]
    assert table.read_text(encoding="utf-8") == gen.render(gen.load_results(tmp_path))
    assert json.loads((tmp_path / "a-step.json").read_text())["command"] == "python a.py"

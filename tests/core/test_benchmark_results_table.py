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

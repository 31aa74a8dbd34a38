"""Fixtures: canonical bytes, atomic writes, parsing, verification, the `rumus fixed verify` CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import canonical_parts

import rumus.fixed as fx
from rumus_contracts import DTypeError, FormatError, ShapeError


def test_canonical_mlp_serialises_byte_for_byte(canonical_fixture: fx.Fixture, canonical_path: Path) -> None:
    assert canonical_fixture.to_canonical_bytes() == canonical_path.read_bytes()


def test_serialising_twice_gives_the_same_bytes(canonical_fixture: fx.Fixture, tmp_path: Path) -> None:
    first = canonical_fixture.to_canonical_bytes()
    again = fx.FixedSequential(*canonical_parts()[:1], fx.FixedReLU(), canonical_parts()[1])
    rebuilt = again.fixture(canonical_parts()[2])
    assert rebuilt.to_canonical_bytes() == first == canonical_fixture.to_canonical_bytes()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    canonical_fixture.write(a)
    canonical_fixture.write(b)
    assert a.read_bytes() == b.read_bytes() == first


def test_canonical_text_layout(canonical_fixture: fx.Fixture) -> None:
    text = canonical_fixture.to_canonical_json()
    assert text == canonical_fixture.to_canonical_bytes().decode()
    assert text.endswith("}\n") and not text.endswith("}\n\n")
    assert '  "weight": [256, -256, 256, 256],' in text and '"bias_shape": null' in text
    assert list(json.loads(text)) == ["format", "version", "dtype", "scale_log2", "scale", "rounding", "overflow",
                                      "layers", "input_shape", "input", "output_shape", "output"]


def test_empty_arrays_and_no_layers() -> None:
    x = fx.tensor([], (0, 3), 2)
    text = fx.FixedFixtureBuilder(2).finish(x, x).to_canonical_json()
    assert '"layers": [],' in text and '"input": [],' in text and '"input_shape": [0, 3],' in text


def test_write_is_atomic_and_replaces(canonical_fixture: fx.Fixture, tmp_path: Path) -> None:
    target = tmp_path / "fx.json"
    target.write_text("old contents")
    assert canonical_fixture.write(str(target)) == target
    assert target.read_bytes() == canonical_fixture.to_canonical_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fx.json"]  # no temp file left behind


def test_failed_write_leaves_the_old_file(canonical_fixture: fx.Fixture, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "fx.json"
    target.write_text("old contents")

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        canonical_fixture.write(target)
    assert target.read_text() == "old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fx.json"]


def test_parse_round_trip(canonical_fixture: fx.Fixture, canonical_path: Path) -> None:
    loaded = fx.load_fixture(canonical_path)
    assert loaded == canonical_fixture
    assert fx.Fixture.from_json(canonical_path.read_text()) == loaded
    assert fx.Fixture.from_json(json.dumps(json.loads(canonical_path.read_text()))) == loaded  # any spelling
    assert loaded.to_canonical_bytes() == canonical_path.read_bytes()
    assert loaded.scale == 256


def test_verify_ok_and_tampered(canonical_path: Path) -> None:
    good = fx.load_fixture(canonical_path)
    result = fx.verify(good)
    assert result.ok and result.n_values == 1 and "match" in result.summary()
    doc = json.loads(canonical_path.read_text())
    doc["output"] = [769]
    bad = fx.verify(fx.Fixture.from_json(json.dumps(doc)))
    assert not bad and bad.first_index == 0 and bad.recorded == 769 and bad.recomputed == 768


def test_builder_checks() -> None:
    l1, l2, x = canonical_parts()
    with pytest.raises(DTypeError, match="scale"):
        fx.FixedFixtureBuilder(4).add_linear(l1)
    with pytest.raises(ShapeError, match="in_features"):
        fx.FixedFixtureBuilder(8).add_linear(fx.FixedLinear([[1], [2], [3]], None, 8)).finish(x, x)
    with pytest.raises(ShapeError, match="output_shape"):
        fx.FixedFixtureBuilder(8).add_linear(l2).finish(x, x)
    with pytest.raises(DTypeError, match="scale"):
        fx.FixedFixtureBuilder(8).add_relu().finish(x, fx.tensor([1, 2], (1, 2), 7))
    with pytest.raises(DTypeError, match="16"):
        fx.FixedFixtureBuilder(16)


# ---- malformed fixtures: FormatError naming the field ------------------------------------------------

def _mutate(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    if value is KeyError:
        del node[int(last) if last.isdigit() else last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


MALFORMED = [
    ("format", "other", "format"), ("version", 2, "version"), ("version", True, "version"),
    ("dtype", "int16", "dtype"), ("scale_log2", 16, "scale_log2"), ("scale_log2", "8", "scale_log2"),
    ("scale", 255, "scale"), ("rounding", "half_even", "rounding"), ("overflow", "wrap", "overflow"),
    ("layers", {}, "layers"), ("layers.0.kind", "conv", "layers[0].kind"),
    ("layers.0.weight", [256, -256, 256], "layers[0].weight"),
    ("layers.0.weight", [256, -256, 256, 40000], "layers[0].weight[3]"),
    ("layers.0.weight_shape", [2, 3], "layers[0].weight_shape"), ("layers.0.in_features", 3, "layers[0]"),
    ("layers.2.bias", None, "layers[2].bias"), ("layers.2.bias", [1, 2], "layers[2].bias"),
    ("layers.2.bias_shape", [2], "layers[2].bias_shape"), ("layers.1.extra", 1, "layers[1].extra"),
    ("layers.2.out_features", KeyError, "layers[2].out_features"), ("input", [256], "input"),
    ("input", [256, 1.5], "1.5"), ("input_shape", [2, 1], "layers[0].in_features"),
    ("output_shape", [1, 2], "output_shape"), ("output", [768, 1], "output"), ("output", KeyError, "output"),
    ("extra", 0, "extra"),
]


@pytest.mark.parametrize("path,value,field", MALFORMED, ids=[f"{p}={v!r}" for p, v, _ in MALFORMED])
def test_malformed_fixture_names_the_field(canonical_path: Path, path: str, value: Any, field: str) -> None:
    doc = json.loads(canonical_path.read_text())
    _mutate(doc, path, value)
    with pytest.raises(FormatError) as info:
        fx.Fixture.from_json(json.dumps(doc))
    assert field in str(info.value)


@pytest.mark.parametrize("text,word", [("{", "not valid JSON"), ("[]", "object"), (b"\xff", "UTF-8"),
                                       ('{"format": 1, "format": 2}', "twice"), ("NaN", "integers")])
def test_malformed_text(text: str | bytes, word: str) -> None:
    with pytest.raises(FormatError, match=word):
        fx.Fixture.from_json(text)


# ---- the CLI -----------------------------------------------------------------------------------------

def test_cli_ok(canonical_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fx.verify_main([str(canonical_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK ") and "1 output value matches bit for bit" in out and "3 layers" in out


def test_cli_tampered_reports_first_differing_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    l1 = fx.FixedLinear([[1, 2, 3], [4, 5, 6]], [7, 8, 9], 0)
    fixture = fx.FixedSequential(l1).fixture(fx.tensor([1, 1, 2, 2], (2, 2), 0))
    doc = fixture.to_dict()
    doc["output"][4] += 1  # flat index 4 = position [1, 1]
    doc["output"][5] -= 1
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc))
    assert fx.verify_main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "first differing index 4" in out and "position [1, 1]" in out
    assert "2 of 6 values differ" in out


def test_cli_malformed_and_missing(tmp_path: Path, canonical_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(canonical_path.read_text())
    doc["layers"][0]["weight"] = "oops"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert fx.verify_main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "FormatError" in err and "layers[0].weight" in err
    assert fx.verify_main([str(tmp_path / "missing.json")]) == 2
    assert fx.verify_main([]) == 2  # usage error, reported without exiting the process
    assert fx.verify_main([str(canonical_path), str(bad)]) == 2


def test_cli_as_a_module(canonical_path: Path) -> None:
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-m", "rumus.fixed.cli", str(canonical_path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK ")

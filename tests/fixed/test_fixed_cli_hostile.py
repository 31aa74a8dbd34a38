"""`rumus fixed verify` on issue 20's hostile fixtures, as a real process: exit 2, one line, no traceback."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

CANONICAL = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "canonical_fixed_mlp.json")
if not os.path.exists(CANONICAL):
    CANONICAL = "/work/shared/fixtures/canonical_fixed_mlp.json"


def _edited(**top: object) -> str:
    doc = json.load(open(CANONICAL))
    doc.update(copy.deepcopy(top))
    return json.dumps(doc)


def _layer0(**fields: object) -> str:
    doc = json.load(open(CANONICAL))
    doc["layers"][0].update(fields)
    return json.dumps(doc)


HOSTILE = {
    "nested 1000 deep": ("[" * 1000 + "]" * 1000, "nested 1000 levels deep"),
    "4301-digit integer": ('{"format": ' + "9" * 4301 + "}", "4301 digits"),
    "input_shape with 101 dims": (_edited(input_shape=[1] * 101), "input_shape: has 101 dims"),
    "width 2^62": (_layer0(in_features=2**62), "digits"),
    "width 2^25": (_layer0(in_features=2**25), "layers[0].in_features: 33554432 is outside 0..16777216"),
    "zero-width layer": (_layer0(out_features=0, weight_shape=[2, 0], weight=[]),
                         "layers[0].out_features: is 0; a linear layer needs at least one feature"),
}


@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_hostile_fixture_exits_2_with_one_line(tmp_path, label: str) -> None:
    text, message = HOSTILE[label]
    path = tmp_path / "f.json"
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "rumus", "fixed", "verify", str(path)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "RUMUS_BACKEND": "cpu"})
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "differs" not in out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ERROR {path}: malformed fixture: FormatError: ")
    assert message in lines[0]

"""Three corpus programs (tests/compat/corpus/), run by the harness under torch and under rumus with the
imports renamed: each step's loss must match torch's. The whole corpus runs as its own CI step
(`python tests/compat/corpus/run_corpus.py`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(CORPUS))

import fetch_packages  # noqa: E402
import run_corpus  # noqa: E402

SMOKE = ["vit", "gpt2_lm", "mlp_mixer"]


@pytest.fixture(scope="module")
def packages() -> Path:
    try:
        return fetch_packages.fetch_all()
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"the corpus packages could not be downloaded with pip: {exc}")


def test_three_programs_match_torch(packages: Path) -> None:
    torch_runs = run_corpus.run_one(",".join(SMOKE), "torch", [0])
    rumus_runs = run_corpus.run_one(",".join(SMOKE), "rumus", [0])
    for name, t, r in zip(SMOKE, torch_runs, rumus_runs):
        assert "error" not in t, f"{name} under torch: {t.get('error')}"
        verdict, why = run_corpus.verdict([t], r)
        assert verdict == "match", f"{name}: {verdict} {why}"
        assert len(r["losses"]) == 3 and r["losses"][-1] < r["losses"][0], name


def test_renamed_import_is_rumus() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import torch_alias; torch_alias.install(); "
            "import torch, torch.nn.functional as F, rumus; from torch.utils.data import DataLoader; "
            "assert torch is rumus and F is rumus.nn.functional and DataLoader is rumus.utils.data.DataLoader; "
            "assert torch.__spec__.name == 'rumus'; "
            "import importlib.util; "
            "print('ok' if importlib.util.find_spec('torch.no_such_module') is None else 'found')")
    out = subprocess.run([sys.executable, "-c", code, str(CORPUS)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr

"""The SPEC A2-A4 models and data, taken from the float32 acceptance tests themselves (loaded by path:
tests/nn is not a package), so the mixed-precision runs train exactly what the float32 runs train."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

_NN = Path(__file__).resolve().parent.parent / "nn"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_amp_spec_{name}", _NN / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


a3_a4 = _load("test_acceptance_a3_a4")
lenet = _load("test_acceptance_lenet")

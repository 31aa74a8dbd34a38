"""Everything a forward pass may use round-trips: each op's schema samples and each nn layer / functional of
tests/onnx/roundtrip_modules.py is exported, run in onnxruntime, imported back with rm.onnx.load and run on
cpu and on wgpu, all matching rumus eager; the ops that cannot are listed with the reason and the export
refuses them with OnnxExportError (tests/onnx/roundtrip.py prints the coverage table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from roundtrip import REFUSED, WGPU_GAPS, Case, _Op, all_cases, op_cases, round_trip, training_only, wgpu_device

import rumus as rm
from rumus.backend_api import from_storage, plugins
from rumus_contracts.onnx_lowering import OnnxExportError

pytest.importorskip("onnxruntime")
CASES = all_cases()
WGPU = wgpu_device()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_round_trip(case: Case, tmp_path: Path) -> None:
    devices = ["cpu"] + ([WGPU] if WGPU is not None and case.family not in WGPU_GAPS else [])
    worst = round_trip(case, devices, tmp_path)
    assert "cpu" in worst


def test_every_op_is_round_tripped_refused_or_training_only() -> None:
    ops = plugins().ops
    covered = {c.name.split("[")[0] for c in op_cases()}
    for name in ops.names():
        schema = ops.get(name)
        kinds = [name in covered, name in REFUSED, training_only(schema)]
        assert sum(kinds) == 1, f"op '{name}': round-tripped {kinds[0]}, refused {kinds[1]}, training-only {kinds[2]}"
    assert set(REFUSED) <= set(ops.names()), set(REFUSED) - set(ops.names())  # no stale entry


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_op_raises_a_clear_export_error(name: str, tmp_path: Path) -> None:
    from rumus_conformance.cases import samples
    schema = plugins().ops.get(name)
    sample = samples(schema)[0]
    dtypes = sample.dtypes or [None] * len(sample.inputs)
    args = tuple(rm.tensor(np.asarray(a, dtype=np.float32) if np.asarray(a).dtype == np.float64 else np.asarray(a))
                 if dt is None else from_storage(np.asarray(a), dt) for a, dt in zip(sample.inputs, dtypes))
    path = tmp_path / "r.onnx"
    with pytest.raises(OnnxExportError) as info:
        rm.onnx.export(_Op(name, dict(sample.attrs)), args, str(path))
    assert name in str(info.value) or "no ONNX" in str(info.value), str(info.value)
    assert not path.exists()

"""BERT- and GPT-2-style models written in plain torch, exported by both of torch's exporters (TorchScript
and dynamo) with dynamic batch and sequence, import into rumus and match onnxruntime at other sizes, on the
CPU and on wgpu."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import run_ort

import rumus as rm
from rumus import BackendUnavailable

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from _torch_transformers import VOCAB, Bert, Gpt2, export  # noqa: E402


def _devices() -> list[str]:
    try:
        rm._runtime.backend("wgpu").devices()
    except BackendUnavailable:
        return ["cpu"]
    return ["cpu", "wgpu:0"]


def _has_onnxscript() -> bool:
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return False
    return True


EXPORTERS = ["legacy", pytest.param("dynamo", marks=pytest.mark.skipif(not _has_onnxscript(),
                                                                        reason="dynamo export needs onnxscript"))]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: Any) -> Any:
    """Each (model, exporter) exported once for the module."""
    folder = tmp_path_factory.mktemp("torch_tf")
    cache: dict[tuple[str, str], Path] = {}

    def get(model: str, exporter: str) -> Path:
        key = (model, exporter)
        if key not in cache:
            torch.manual_seed(0)
            ids = torch.randint(0, VOCAB, (3, 11))
            if model == "bert":
                m, args, names = Bert(), (ids, torch.ones(3, 11, dtype=torch.long)), ["ids", "mask"]
            else:
                m, args, names = Gpt2(), (ids,), ["ids"]
            path = folder / f"{model}_{exporter}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                export(m, args, names, path, dynamo=exporter == "dynamo")
            cache[key] = path
        return cache[key]
    return get


def _feeds(model: str, b: int, s: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(b * 31 + s)
    ids = r.integers(0, VOCAB, (b, s))
    if model == "gpt2":
        return {"ids": ids}
    mask = np.ones((b, s), dtype=np.int64)
    mask[-1, s // 3:] = 0
    return {"ids": ids, "mask": mask}


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_torch_export_imports_and_matches_onnxruntime(exported: Any, model: str, exporter: str,
                                                      device: str) -> None:
    path = exported(model, exporter)
    loaded = rm.onnx.load(str(path), device=device)
    for b, s in [(2, 7), (5, 13)]:  # neither is the export's example size
        feeds = _feeds(model, b, s)
        want = run_ort(path, feeds)[0]
        got = loaded(*[rm.tensor(v, device=device) for v in feeds.values()])
        assert str(got.device).startswith(device.split(":")[0])
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-4)

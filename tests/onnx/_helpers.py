"""Export a model, check the file, run it in onnxruntime at several input sizes and compare with rumus."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumus as rm

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def run_ort(path: str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, feeds)]


def export_and_compare(model: Any, make: Callable[[int, int], Sequence[np.ndarray]], path: Path,
                       dynamic: dict[str, dict[int, str]] | None, sizes: Sequence[tuple[int, int]],
                       atol: float = 1e-5, names: Sequence[str] = ("x",)) -> Any:
    """Export at sizes[0]; ORT and a round trip through rm.onnx.load must match rumus at every size."""
    model.eval()
    first = [rm.tensor(a) for a in make(*sizes[0])]
    proto = rm.onnx.export(model, tuple(first), str(path), input_names=list(names), output_names=["y"],
                           dynamic_axes=dynamic)
    onnx.checker.check_model(str(path), full_check=True)
    loaded = rm.onnx.load(str(path))
    for b, t in sizes:
        arrays = make(b, t)
        with rm.no_grad():
            want = model(*[rm.tensor(a) for a in arrays]).numpy()
        got = run_ort(path, dict(zip(names, arrays)))[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
        back = loaded(*[rm.tensor(a) for a in arrays]).numpy()
        np.testing.assert_allclose(back, want, rtol=1e-6, atol=1e-6)
    return proto

"""The ops the issue found unimportable, as torch's exporters write them: each small torch module is exported,
imported with rm.onnx.load and compared with onnxruntime (and the op is checked to be in the file)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import run_ort

import rumus as rm

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
tF = torch.nn.functional


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Any:
        return self.fn(x)


IDX = torch.tensor([2, 0, 3])
CASES: dict[str, tuple[Callable[[Any], Any], tuple[int, ...]]] = {
    "CumSum": (lambda x: torch.cumsum(x, 1), (2, 5, 3)),
    "Tile": (lambda x: x.repeat(2, 1, 3), (2, 4, 3)),
    "TopK": (lambda x: torch.topk(x, 3, dim=-1)[0] + torch.topk(x, 3, dim=-1)[1].float(), (2, 4, 6)),
    "Pad": (lambda x: tF.pad(x, (1, 2, 0, 1), value=0.5), (2, 3, 4, 4)),
    "Einsum": (lambda x: torch.einsum("bij,bkj->bik", x, x), (2, 4, 3)),
    "HardSwish": (lambda x: tF.hardswish(x * 4), (2, 8)),
    "ReduceL2": (lambda x: torch.norm(x, dim=-1), (3, 7)),
    "Sign": (lambda x: torch.sign(x), (3, 7)),
    "Resize": (lambda x: tF.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False), (1, 2, 3, 5)),
    "NonZero": (lambda x: torch.nonzero(x > 0).float().sum(0), (4, 5)),
}


def _export(model: torch.nn.Module, x: Any, path: Path, dynamo: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=dynamo, opset_version=18)


@pytest.mark.parametrize("op", sorted(CASES))
def test_torch_op_imports(tmp_path: Path, op: str) -> None:
    fn, shape = CASES[op]
    torch.manual_seed(0)
    x = torch.randn(*shape)
    path = tmp_path / f"{op}.onnx"
    _export(Fn(fn), x, path, dynamo=False)
    assert op in {n.op_type for n in onnx.load(str(path)).graph.node}
    want = run_ort(path, {"x": x.numpy()})[0]
    got = rm.onnx.load(str(path))(rm.tensor(x.numpy())).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _has_onnxscript() -> bool:
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_onnxscript(), reason="dynamo export needs onnxscript")
def test_advanced_index_from_the_dynamo_exporter(tmp_path: Path) -> None:
    """x[:, idx] as torch 2.13's default exporter writes it (GatherND in the issue's report)."""
    x = torch.randn(2, 5, 3)
    path = tmp_path / "index.onnx"
    _export(Fn(lambda t: t[:, IDX] * 2.0), x, path, dynamo=True)
    assert "GatherND" in {n.op_type for n in onnx.load(str(path)).graph.node}
    want = run_ort(path, {"x": x.numpy()})[0]
    got = rm.onnx.load(str(path))(rm.tensor(x.numpy())).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got, (x[:, IDX] * 2.0).numpy(), rtol=0, atol=1e-6)

"""Sizes read from a dynamic axis while exporting follow it: the file runs at other sizes exactly as rumus
eager does (positions from arange(S), view(B, S, H, D), slices by a length, masks from lengths, expand to
another input's size), and the eager paths are untouched outside export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import run_ort
from _transformers import VOCAB, Bert, Gpt2

import rumus as rm
import rumus.nn as nn
from rumus.onnx._symint import SymInt
from rumus_contracts.onnx_lowering import OnnxExportError

onnx = pytest.importorskip("onnx")


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


def _export_run(model: nn.Module, make: Callable[[int, int], list[np.ndarray]], path: Path,
                names: list[str], sizes: list[tuple[int, int]]) -> Any:
    """Export at sizes[0] with dims 0 and 1 of every input dynamic; ORT and the re-import must equal eager
    rumus at the other sizes."""
    model.eval()
    proto = rm.onnx.export(model, tuple(rm.tensor(a) for a in make(*sizes[0])), str(path), input_names=names,
                           output_names=["y"], dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    back = rm.onnx.load(str(path))
    for b, s in sizes[1:]:
        arrays = make(b, s)
        with rm.no_grad():
            want = model(*[rm.tensor(a) for a in arrays]).numpy()
        got = run_ort(path, dict(zip(names, arrays)))[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        np.testing.assert_allclose(back(*[rm.tensor(a) for a in arrays]).numpy(), want, rtol=0, atol=1e-5)
    return proto


def _ids(b: int, s: int) -> list[np.ndarray]:
    return [np.random.default_rng(b * 100 + s).integers(0, VOCAB, (b, s))]


def _ids_mask(b: int, s: int) -> list[np.ndarray]:
    mask = np.ones((b, s), dtype=np.int64)
    mask[0, s // 2:] = 0  # the first sequence is padded
    return [*_ids(b, s), mask]


def test_gpt2_style_exports_with_dynamic_batch_and_sequence(tmp_path: Path) -> None:
    rm.manual_seed(0)
    proto = _export_run(Gpt2(), _ids, tmp_path / "gpt2.onnx", ["ids"], [(3, 11), (2, 5), (1, 19)])
    ops = {n.op_type for n in proto.graph.node}
    assert {"Range", "Shape", "Trilu"} <= ops  # positions and the causal mask are computed from the length


def test_bert_style_exports_with_dynamic_batch_and_sequence(tmp_path: Path) -> None:
    rm.manual_seed(1)
    proto = _export_run(Bert(), _ids_mask, tmp_path / "bert.onnx", ["ids", "mask"], [(3, 11), (4, 6), (1, 17)])
    assert "Range" in {n.op_type for n in proto.graph.node}


def _floats(b: int, s: int) -> list[np.ndarray]:
    return [np.random.default_rng(b + 7 * s).standard_normal((b, s, 6)).astype(np.float32)]


@pytest.mark.parametrize("name,fn", [
    ("arange of a computed length", lambda x: x[:, 1:, 0] + rm.arange(x.shape[1] - 1).to("float32")),
    ("merged dims", lambda x: x.reshape(x.shape[0] * x.shape[1], 6).sum(1).view(x.size(0), -1)),
    ("slice by a length", lambda x: x[:, : x.shape[1] - 2] * 2.0),
    ("slice from a length", lambda x: x[:, x.shape[1] // 2:]),
    ("zeros of input sizes", lambda x: rm.zeros(x.shape[0], x.shape[1], 6) + x),
    ("ones of a product", lambda x: x.sum(-1).reshape(-1) * rm.ones(x.shape[0] * x.shape[1])),
    ("mask from a length", lambda x: rm.where((rm.arange(x.shape[1]) < x.shape[1] - 1).view(1, -1, 1), x, 0.0)),
    ("causal mask by triu", lambda x: (x @ x.transpose(1, 2)).masked_fill(
        rm.triu(rm.ones(x.shape[1], x.shape[1]), 1) == 1, 0.0)),
    ("float arange", lambda x: x[:, :, 0] * rm.arange(0.0, x.shape[1], 1.0)),
])
def test_shape_arithmetic_follows_the_axis(tmp_path: Path, name: str, fn: Callable[..., Any]) -> None:
    _export_run(Fn(fn), _floats, tmp_path / "m.onnx", ["x"], [(3, 8), (2, 5), (5, 13)])


def test_expand_to_another_inputs_size(tmp_path: Path) -> None:
    def fn(x: Any, y: Any) -> Any:
        return x[:, :1].expand(*y.shape) + y

    def make(b: int, s: int) -> list[np.ndarray]:
        r = np.random.default_rng(b + s)
        return [r.standard_normal((b, s)).astype(np.float32), r.standard_normal((b, s)).astype(np.float32)]
    _export_run(Fn(fn), make, tmp_path / "e.onnx", ["x", "z"], [(3, 8), (2, 5), (6, 4)])


def test_a_python_loop_over_a_dynamic_size_is_refused(tmp_path: Path) -> None:
    def fn(x: Any) -> Any:
        out = x[:, 0]
        for i in range(1, x.shape[1]):  # unrolled at the example's length
            out = out + x[:, i]
        return out
    with pytest.raises(OnnxExportError, match="depends on the size of the dynamic axis 'seq'"):
        rm.onnx.export(Fn(fn), (rm.randn(3, 8, 6),), str(tmp_path / "l.onnx"), input_names=["x"],
                       dynamic_axes={"x": {1: "seq"}})


def test_eager_shapes_stay_plain_ints(tmp_path: Path) -> None:
    x = rm.randn(3, 8, 6)
    rm.onnx.export(Fn(lambda t: rm.arange(t.shape[1]).to("float32") + t[:, :, 0]), (x,), str(tmp_path / "p.onnx"),
                   input_names=["x"], dynamic_axes={"x": {0: "b", 1: "s"}})
    assert all(type(d) is int for d in x.shape)
    assert all(type(d) is int for d in rm.randn(2, 3).view(3, 2).shape)
    assert type(rm.arange(4).shape[0]) is int
    assert not isinstance(rm.zeros(x.shape[1]).shape[0], SymInt)


def _wgpu() -> bool:
    try:
        rm._runtime.backend("wgpu").devices()
    except rm.BackendUnavailable:
        return False
    return True


@pytest.mark.skipif(not _wgpu(), reason="wgpu unavailable")
def test_gpt2_style_on_wgpu_exports_and_round_trips(tmp_path: Path) -> None:
    """Traced on wgpu with dynamic axes; the file runs in onnxruntime and, imported onto wgpu, like eager."""
    rm.manual_seed(2)
    model = Gpt2().to("wgpu:0").eval()
    path = tmp_path / "gpt2_wgpu.onnx"
    rm.onnx.export(model, (rm.tensor(_ids(3, 11)[0], device="wgpu:0"),), str(path), input_names=["ids"],
                   output_names=["y"], dynamic_axes={"ids": {0: "batch", 1: "seq"}})
    back = rm.onnx.load(str(path), device="wgpu:0")
    for b, s in [(2, 5), (1, 19)]:
        ids = _ids(b, s)[0]
        with rm.no_grad():
            want = model(rm.tensor(ids, device="wgpu:0")).numpy()
        np.testing.assert_allclose(run_ort(path, {"ids": ids})[0], want, rtol=0, atol=1e-4)
        np.testing.assert_allclose(back(rm.tensor(ids, device="wgpu:0")).numpy(), want, rtol=0, atol=1e-5)

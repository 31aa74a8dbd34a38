"""A size read from a dynamic axis that leaves the graph through Python (int(), a loop over range() of it,
math.sqrt of it, a list of that length, a true division) would be frozen at the example's value: the export
refuses it with an error that names the axis, the line of the model's code and what to do. Values read into
Python (.item(), .tolist(), bool()) are refused the same way; x[:, idx] with a computed index stays in the graph."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import run_ort

import rumus as rm
import rumus.nn as nn
from rumus_contracts.onnx_lowering import OnnxExportError

pytest.importorskip("onnx")
HERE = re.escape(Path(__file__).name)


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


def _int_size(x: Any) -> Any:
    s = int(x.shape[1])  # FROZEN-HERE
    return x.reshape(x.shape[0], s, 2, 3).sum(-1)


def _loop(x: Any) -> Any:
    out = x[:, 0]
    for i in range(1, x.shape[1]):
        out = out * 0.5 + x[:, i]  # FROZEN-HERE
    return out


def _sqrt(x: Any) -> Any:
    return x / math.sqrt(x.shape[1])  # FROZEN-HERE


def _list(x: Any) -> Any:
    return x + rm.tensor([[1.0] * 6] * x.shape[1])  # FROZEN-HERE


def _true_div(x: Any) -> Any:
    return x * (x.shape[1] / 2)  # FROZEN-HERE


CASES = {"int()": (_int_size, "int\\(\\)"), "loop over range()": (_loop, "Python loop"),
         "math.sqrt": (_sqrt, "float\\(\\)"), "list of that length": (_list, "frozen"),
         "true division": (_true_div, "true division")}


def _line(fn: Callable[..., Any]) -> int:
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if "FROZEN-HERE" in text)


@pytest.mark.parametrize("name", list(CASES))
def test_a_size_that_leaves_the_graph_names_axis_line_and_remedy(tmp_path: Path, name: str) -> None:
    fn, how = CASES[name]
    with pytest.raises(OnnxExportError) as info:
        rm.onnx.export(Fn(fn), (rm.randn(9, 7, 6),), str(tmp_path / "m.onnx"), input_names=["x"],
                       dynamic_axes={"x": {0: "batch", 1: "seq"}})
    msg = str(info.value)
    assert "'seq' (x dim 1)" in msg and "'batch'" not in msg.split("Where")[0], msg  # the axis that matters
    assert re.search(f"{HERE}:{_line(fn)}\\b", msg), msg  # the line where the size left the graph
    assert re.search(how, msg), msg
    assert "tensor ops" in msg or "Build it from the inputs with ops" in msg, msg  # what to do
    assert not (tmp_path / "m.onnx").exists()  # nothing written


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_model_exports_with_that_axis_static(tmp_path: Path, name: str) -> None:
    fn, _ = CASES[name]
    x = rm.randn(9, 7, 6)
    path = tmp_path / "m.onnx"
    rm.onnx.export(Fn(fn), (x,), str(path), input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    x2 = np.random.default_rng(0).standard_normal((5, 7, 6)).astype(np.float32)
    with rm.no_grad():
        want = Fn(fn)(rm.tensor(x2)).numpy()
    np.testing.assert_allclose(run_ort(path, {"x": x2})[0], want, rtol=1e-5, atol=1e-5)


def test_a_value_read_into_python_is_refused_with_its_line(tmp_path: Path) -> None:
    def fn(x: Any) -> Any:
        return x * x.amax().item()  # VALUE-READ
    with pytest.raises(OnnxExportError, match=f"read into Python at .*{HERE}:\\d+ .*VALUE-READ.*Keep them in tensors"):
        rm.onnx.export(Fn(fn), (rm.randn(3, 4),), str(tmp_path / "v.onnx"), input_names=["x"])


def test_python_if_on_a_value_is_refused(tmp_path: Path) -> None:
    def fn(x: Any) -> Any:
        return x + 1 if bool((x > 0).all()) else x - 1
    with pytest.raises(OnnxExportError, match="read into Python"):
        rm.onnx.export(Fn(fn), (rm.randn(3, 4),), str(tmp_path / "b.onnx"), input_names=["x"])


def test_indexing_by_a_computed_index_stays_in_the_graph(tmp_path: Path) -> None:
    """x[:, idx] reads the index on the host in eager mode; exported, the index is a graph value (a constant
    there would give the example's columns for every input)."""
    def fn(x: Any, order: Any) -> Any:
        return x[:, order[0] - 6]  # negative positions count from the end, as in eager
    x = rm.randn(5, 6)
    order = rm.tensor(np.random.default_rng(1).integers(0, 6, (5, 4)))
    path = tmp_path / "ix.onnx"
    rm.onnx.export(Fn(fn), (x, order), str(path), input_names=["x", "order"],
                   dynamic_axes={"x": {0: "batch"}, "order": {0: "batch"}})
    rng = np.random.default_rng(2)
    x2, o2 = rng.standard_normal((3, 6)).astype(np.float32), rng.integers(0, 6, (3, 4))
    with rm.no_grad():
        want = Fn(fn)(rm.tensor(x2), rm.tensor(o2)).numpy()
    np.testing.assert_array_equal(run_ort(path, {"x": x2, "order": o2})[0], want)
    np.testing.assert_array_equal(rm.onnx.load(str(path))(rm.tensor(x2), rm.tensor(o2)).numpy(), want)

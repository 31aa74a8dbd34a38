"""ONNX export hooks are process globals: ops run by another thread during an export must neither enter the
exported graph nor be changed (the tracer records only the exporting thread)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import onnx

import rumus as rm
from rumus import nn


class _Slow(nn.Module):
    """A small MLP whose forward waits until the other thread has run ops mid-export."""

    def __init__(self, started: threading.Event, done: threading.Event) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)
        self.started, self.done = started, done

    def forward(self, x: Any) -> Any:
        h = rm.relu(self.a(x))
        self.started.set()
        assert self.done.wait(30)
        return self.b(h)


def test_other_threads_ops_stay_out_of_the_export(tmp_path: Any) -> None:
    started, done = threading.Event(), threading.Event()
    model = _Slow(started, done)
    other: dict[str, Any] = {}

    def busy() -> None:
        assert started.wait(30)
        x = rm.randn(5, 6)
        y = rm.cat([x.exp(), x.reshape(6, 5).T.sin()], dim=1).sum(0)  # ops, a view, cat, a reduction
        xs = x.numpy()
        other["y"], other["want"] = y.numpy(), np.concatenate([np.exp(xs), np.sin(xs.reshape(6, 5).T)], 1).sum(0)
        done.set()

    t = threading.Thread(target=busy)
    t.start()
    path = tmp_path / "m.onnx"
    rm.onnx.export(model, (rm.randn(2, 4),), str(path), input_names=["x"], output_names=["y"])
    t.join()
    np.testing.assert_allclose(other["y"], other["want"], rtol=1e-5)
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert not {"Exp", "Sin", "Concat", "ReduceSum"} & set(ops), ops
    x = rm.randn(2, 4)
    with rm.no_grad():
        want = model.b(rm.relu(model.a(x))).numpy()
    import onnxruntime as ort
    got = ort.InferenceSession(str(path)).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

"""Recurrent layers export as ONNX LSTM / GRU / RNN nodes (not unrolled over the example's length): the
files run in onnxruntime at other batch and sequence sizes, match rumus to 1e-5, and load back; ONNX files
written by torch.onnx.export for the same layers import and match torch."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import export_and_compare, run_ort

import rumus as rm
from rumus import nn
from rumus.onnx import OnnxExportError

RNG = np.random.default_rng(7)
SIZES = [(2, 5), (3, 9), (1, 1)]


class RecurrentLM(nn.Module):
    """Token embedding -> a 2-layer LSTM -> a vocabulary head: the recurrent LM of SPEC's A4 family."""

    def __init__(self, cell: str = "LSTM", **kw: Any) -> None:
        super().__init__()
        self.emb = nn.Embedding(31, 12)
        self.rnn = getattr(nn, cell)(12, 10, batch_first=True, **kw)
        dirs = 2 if kw.get("bidirectional") else 1
        self.head = nn.Linear(10 * dirs, 31)

    def forward(self, ids: Any) -> Any:
        y, _ = self.rnn(self.emb(ids))
        return self.head(y)


def _ids(b: int, t: int) -> list[np.ndarray]:
    return [RNG.integers(0, 31, (b, t)).astype(np.int64)]


@pytest.mark.parametrize("cell, kw", [
    ("LSTM", {"num_layers": 2}),
    ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("RNN", {"nonlinearity": "relu"}),
    ("RNN", {"num_layers": 2, "bias": False}),
    ("LSTM", {"bidirectional": True}),
])
def test_recurrent_lm_runs_at_every_batch_and_length(tmp_path: Path, cell: str, kw: dict[str, Any]) -> None:
    model = RecurrentLM(cell, **kw)
    proto = export_and_compare(model, _ids, tmp_path / "lm.onnx", {"x": {0: "batch", 1: "seq"}}, SIZES)
    ops = [n.op_type for n in proto.graph.node]
    want = {"LSTM": "LSTM", "GRU": "GRU", "RNN": "RNN"}[cell]
    assert ops.count(want) == kw.get("num_layers", 1), ops  # one node per layer, no unrolled time steps
    assert "Sigmoid" not in ops and "Tanh" not in ops


class StatefulLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 5, num_layers=2)

    def forward(self, x: Any, h: Any, c: Any) -> Any:
        y, (h_n, c_n) = self.lstm(x, (h, c))
        return y, h_n, c_n


def test_initial_and_final_states_are_exported(tmp_path: Path) -> None:
    model = StatefulLSTM().eval()
    args = [RNG.standard_normal(s).astype(np.float32) for s in ((4, 3, 6), (2, 3, 5), (2, 3, 5))]
    rm.onnx.export(model, tuple(rm.tensor(a) for a in args), str(tmp_path / "s.onnx"), input_names=["x", "h", "c"],
                   output_names=["y", "h_n", "c_n"], dynamic_axes={"x": {0: "seq", 1: "batch"}, "h": {1: "batch"},
                                                                   "c": {1: "batch"}})
    for seq, batch in ((4, 3), (7, 2)):
        feeds = [RNG.standard_normal(s).astype(np.float32) for s in ((seq, batch, 6), (2, batch, 5), (2, batch, 5))]
        with rm.no_grad():
            want = [t.numpy() for t in model(*[rm.tensor(a) for a in feeds])]
        got = run_ort(tmp_path / "s.onnx", dict(zip("xhc", feeds)))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_unbatched_input(tmp_path: Path) -> None:
    gru = nn.GRU(4, 3).eval()
    x = rm.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    rm.onnx.export(gru, (x,), str(tmp_path / "u.onnx"), input_names=["x"], output_names=["y", "h"],
                   dynamic_axes={"x": {0: "seq"}})
    x2 = RNG.standard_normal((8, 4)).astype(np.float32)
    with rm.no_grad():
        want = [t.numpy() for t in gru(rm.tensor(x2))]
    for g, w in zip(run_ort(tmp_path / "u.onnx", {"x": x2}), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_packed_sequences_are_refused(tmp_path: Path) -> None:
    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(3, 2)

        def forward(self, x: Any) -> Any:
            packed = nn.utils.rnn.pack_padded_sequence(x, [x.shape[0]] * x.shape[1])
            return self.rnn(packed)[1][0]
    with pytest.raises(OnnxExportError, match="PackedSequence"):
        rm.onnx.export(Packed(), (rm.randn(4, 2, 3),), str(tmp_path / "p.onnx"))


def test_a_loop_over_a_dynamic_dim_is_refused_not_frozen(tmp_path: Path) -> None:
    """Traced op by op, a Python loop over the sequence is unrolled at the example's length; a file claiming
    a dynamic sequence axis would silently ignore the extra steps at other lengths. Export refuses it."""
    class Loop(nn.Module):
        def forward(self, x: Any) -> Any:
            acc = x[:, 0]
            for t in range(1, x.shape[1]):
                acc = rm.tanh(rm.add(acc, x[:, t]))
            return acc
    with pytest.raises(OnnxExportError, match="depends on the size of the dynamic axis 'seq'"):
        rm.onnx.export(Loop(), (rm.randn(2, 5, 3),), str(tmp_path / "l.onnx"), input_names=["x"],
                       dynamic_axes={"x": {1: "seq"}})
    # a static export of the same model is fine (no dynamic axis, nothing to freeze wrongly)
    rm.onnx.export(Loop(), (rm.randn(2, 5, 3),), str(tmp_path / "l.onnx"), input_names=["x"])


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("cell, kw", [("LSTM", {"num_layers": 2}), ("GRU", {"bidirectional": True}),
                                      ("RNN", {"nonlinearity": "relu", "num_layers": 2})])
def test_torch_exported_recurrent_layers_import(tmp_path: Path, cell: str, kw: dict[str, Any]) -> None:
    torch.manual_seed(0)
    tm = getattr(torch.nn, cell)(6, 5, batch_first=True, **kw).eval()
    x = torch.randn(3, 7, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(tm, (x,), str(tmp_path / "t.onnx"), input_names=["x"], output_names=["y", "h"],
                          dynamic_axes={"x": {0: "batch", 1: "seq"}}, dynamo=False)
    loaded = rm.onnx.load(str(tmp_path / "t.onnx"))
    for shape in ((3, 7, 6), (2, 4, 6)):
        xs = torch.randn(*shape)
        with torch.no_grad():
            want = tm(xs)[0].numpy()
        got = loaded(rm.tensor(xs.numpy()))
        got = got[0] if isinstance(got, tuple) else got
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_imported_lstm_fine_tunes(tmp_path: Path) -> None:
    """The imported recurrent weights are Parameters: a gradient step changes them and lowers the loss."""
    model = RecurrentLM("LSTM").eval()
    ids = rm.tensor(_ids(2, 6)[0])
    rm.onnx.export(model, (ids,), str(tmp_path / "f.onnx"), input_names=["x"])
    loaded = rm.onnx.load(str(tmp_path / "f.onnx"))
    opt = rm.optim.SGD(loaded.parameters(), lr=0.5)
    target = rm.tensor(_ids(2, 6)[0])
    losses = []
    for _ in range(5):
        loss = nn.functional.cross_entropy(loaded(ids).reshape(12, 31), target.reshape(12))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0] - 0.1, losses

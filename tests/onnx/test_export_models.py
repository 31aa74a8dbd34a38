"""Whole models: MLP, CNN with BatchNorm (eval), transformer-encoder LM with a causal mask. Exported once,
run in onnxruntime at two batch sizes and two sequence lengths (1e-5 vs rumus), and read back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _helpers import export_and_compare

import rumus as rm
from rumus import nn

RNG = np.random.default_rng(1)


class TinyLM(nn.Module):
    """Token + learned position embeddings, a causal transformer encoder, a tied-free LM head."""

    def __init__(self, vocab: int = 31, d: int = 16, heads: int = 2, layers: int = 2, max_len: int = 40) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=24, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: Any) -> Any:
        t = ids.shape[1]
        h = rm.add(self.tok(ids), self.pos.weight[:t])
        return self.head(self.encoder(h, is_causal=True))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 7, 3, padding=1), nn.BatchNorm2d(7), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(7, 4)

    def forward(self, x: Any) -> Any:
        return self.head(rm.flatten(self.features(x), 1))


def _train_bn(model: Any, x: np.ndarray) -> None:
    """A few training-mode passes so the running statistics are not the initial 0/1."""
    model.train()
    with rm.no_grad():
        for _ in range(3):
            model(rm.tensor(x))
    model.eval()


def test_mlp(tmp_path: Any) -> None:
    model = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    export_and_compare(model, lambda b, t: [RNG.standard_normal((b, 10)).astype(np.float32)], tmp_path / "mlp.onnx",
                       {"x": {0: "batch"}}, [(7, 0), (2, 0)])


def test_cnn_with_batchnorm_eval(tmp_path: Any) -> None:
    model = CNN()
    _train_bn(model, RNG.standard_normal((8, 3, 12, 12)).astype(np.float32))
    export_and_compare(model, lambda b, t: [RNG.standard_normal((b, 3, 12, 12)).astype(np.float32)],
                       tmp_path / "cnn.onnx", {"x": {0: "batch"}}, [(5, 0), (2, 0)])


def test_transformer_lm_with_causal_mask(tmp_path: Any) -> None:
    rm.manual_seed(0)
    model = TinyLM()
    make = lambda b, t: [RNG.integers(0, 31, (b, t)).astype(np.int64)]  # noqa: E731
    export_and_compare(model, make, tmp_path / "lm.onnx", {"x": {0: "batch", 1: "seq"}}, [(3, 9), (5, 13), (2, 4)])


def test_causal_mask_really_is_causal(tmp_path: Any) -> None:
    """Changing a later token must not change earlier logits in the ONNX graph at a new sequence length."""
    from _helpers import run_ort
    model = TinyLM()
    model.eval()
    rm.onnx.export(model, (rm.tensor(RNG.integers(0, 31, (3, 9))),), str(tmp_path / "lm.onnx"), input_names=["x"],
                   dynamic_axes={"x": {0: "batch", 1: "seq"}})
    ids = RNG.integers(0, 31, (2, 12)).astype(np.int64)
    other = ids.copy()
    other[:, -1] = (other[:, -1] + 1) % 31
    a, b = run_ort(tmp_path / "lm.onnx", {"x": ids})[0], run_ort(tmp_path / "lm.onnx", {"x": other})[0]
    np.testing.assert_array_equal(a[:, :-1], b[:, :-1])
    assert np.abs(a[:, -1] - b[:, -1]).max() > 1e-4


def test_oldest_supported_opset(tmp_path: Any) -> None:
    """Opset 17: reductions take axes as attributes and GELU is written out (no Gelu op before 20)."""
    from _helpers import run_ort

    class Mix(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.RMSNorm(6)
            self.lin = nn.Linear(6, 4)

        def forward(self, x: Any) -> Any:
            h = self.lin(self.norm(x))
            a = rm.add(nn.functional.gelu(h), nn.functional.gelu(h, approximate="tanh"))
            spread = rm.add(a.var(-1, keepdim=True), a.amax(-1, keepdim=True))
            return rm.add(rm.sub(a, a.mean(-1, keepdim=True)), spread)
    model = Mix()
    x = rm.tensor(RNG.standard_normal((7, 6)).astype(np.float32))
    rm.onnx.export(model, (x,), str(tmp_path / "o17.onnx"), input_names=["x"], opset_version=17,
                   dynamic_axes={"x": {0: "b"}})
    x2 = RNG.standard_normal((3, 6)).astype(np.float32)
    with rm.no_grad():
        want = model(rm.tensor(x2)).numpy()
    np.testing.assert_allclose(run_ort(tmp_path / "o17.onnx", {"x": x2})[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm.onnx.load(str(tmp_path / "o17.onnx"))(rm.tensor(x2)).numpy(), want, rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_models_export_and_run(tmp_path: Any, dtype: str) -> None:
    """A model cast with .half() / .bfloat16() exports with 16-bit initializers and inputs; onnxruntime (float16)
    matches rumus's own 16-bit forward, and the file loads back with 16-bit parameters. onnxruntime's CPU provider
    has no bfloat16 MatMul, so the bfloat16 file is checked by onnx and by the round trip only."""
    import onnx
    from _helpers import run_ort
    rm.manual_seed(0)
    model = getattr(rm.nn.Sequential(rm.nn.Linear(8, 16), rm.nn.GELU(), rm.nn.LayerNorm(16), rm.nn.Linear(16, 4)),
                    "half" if dtype == "float16" else "bfloat16")().eval()
    x = rm.randn(3, 8).to(getattr(rm, dtype))
    path = str(tmp_path / "h.onnx")
    proto = rm.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b"}})
    want_type = onnx.TensorProto.FLOAT16 if dtype == "float16" else onnx.TensorProto.BFLOAT16
    assert {t.data_type for t in proto.graph.initializer if t.name.endswith("weight")} == {want_type}
    xs = rm.randn(5, 8).to(getattr(rm, dtype))
    with rm.no_grad():
        want = model(xs).to(rm.float32).numpy()
    back = rm.onnx.load(path)
    got_back = back(xs).to(rm.float32).numpy()
    tol = 1e-2 if dtype == "float16" else 5e-2  # rounding of 16-bit intermediates may differ by an ulp here and there
    np.testing.assert_allclose(got_back, want, rtol=tol, atol=tol)
    if dtype == "float16":
        got = run_ort(path, {"x": xs.numpy()})[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol)

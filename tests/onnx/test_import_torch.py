"""ONNX files written by torch.onnx.export (legacy TorchScript exporter: onnxscript is not installed) for
the same layers import with rm.onnx.load and match torch's outputs."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import rumus as rm

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
tnn = torch.nn
RNG = np.random.default_rng(2)


class TorchCNN(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(tnn.Conv2d(3, 6, 3, padding=1), tnn.BatchNorm2d(6), tnn.ReLU(), tnn.MaxPool2d(2),
                                       tnn.Conv2d(6, 5, 3, stride=2, padding=1), tnn.AvgPool2d(2), tnn.Flatten(),
                                       tnn.Linear(5 * 1 * 1, 4), tnn.Softmax(-1))

    def forward(self, x: Any) -> Any:
        return self.features(x)


class TorchEncoder(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = tnn.Embedding(23, 16)
        layer = tnn.TransformerEncoderLayer(16, 2, dim_feedforward=24, dropout=0.0, batch_first=True)
        self.enc = tnn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.norm = tnn.LayerNorm(16)
        self.head = tnn.Linear(16, 23)

    def forward(self, ids: Any) -> Any:
        t = ids.shape[1]
        mask = tnn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.norm(self.enc(self.emb(ids), mask=mask)))


class TorchSeq(tnn.Module):
    """Per-token layers with torch-traced shape arithmetic (x.shape feeds reshapes)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = tnn.Embedding(23, 8)
        self.norm = tnn.LayerNorm(8)
        self.proj = tnn.Linear(8, 6)

    def forward(self, ids: Any) -> Any:
        b, t = ids.shape
        h = self.norm(self.emb(ids)).reshape(b * t, -1)
        return torch.softmax(self.proj(h).reshape(b, t, -1), -1)


CASES: list[tuple[str, Any, Any]] = [
    ("mlp", lambda: tnn.Sequential(tnn.Linear(8, 16), tnn.GELU(), tnn.Linear(16, 16), tnn.LeakyReLU(0.1),
                                   tnn.Linear(16, 3), tnn.LogSoftmax(-1)),
     lambda: RNG.standard_normal((4, 8)).astype(np.float32)),
    ("activations", lambda: tnn.Sequential(tnn.SiLU(), tnn.ELU(), tnn.Tanh(), tnn.Sigmoid(), tnn.Softplus()),
     lambda: RNG.standard_normal((4, 8)).astype(np.float32)),
    ("cnn_bn", TorchCNN, lambda: RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)),
    ("group_layer_norm", lambda: tnn.Sequential(tnn.GroupNorm(2, 4), tnn.Flatten(), tnn.LayerNorm(4 * 5 * 5)),
     lambda: RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)),
    ("conv_transpose", lambda: tnn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     lambda: RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)),
    ("transformer_encoder", TorchEncoder, lambda: RNG.integers(0, 23, (2, 7)).astype(np.int64)),
]


@pytest.mark.parametrize("name,factory,make", CASES, ids=[c[0] for c in CASES])
def test_torch_exported_file_imports_and_matches(tmp_path: Any, name: str, factory: Any, make: Any) -> None:
    torch.manual_seed(0)
    model = factory().eval()
    for m in model.modules():
        if isinstance(m, tnn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    x = make()
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(x),), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    loaded = rm.onnx.load(str(path))
    got = loaded(rm.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_imported_initializers_are_trainable_parameters(tmp_path: Any) -> None:
    model = tnn.Sequential(tnn.Linear(4, 3)).eval()
    path = tmp_path / "lin.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(2, 4),), str(path), dynamo=False)
    loaded = rm.onnx.load(str(path))
    params = dict(loaded.named_parameters())
    assert set(params) == {"0.weight", "0.bias"}
    x = rm.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    loss = rm.sum(loaded(x))
    loss.backward()
    assert all(p.grad is not None and np.abs(p.grad.numpy()).sum() > 0 for p in params.values())


@pytest.mark.parametrize("name,factory,make,new_shape", [
    ("mlp_dynamic_batch", CASES[0][1], CASES[0][2], (9, 8)),
    ("cnn_dynamic_batch", TorchCNN, CASES[2][2], (5, 3, 8, 8)),
    ("seq_dynamic_batch_seq", lambda: TorchSeq(), lambda: RNG.integers(0, 23, (2, 7)).astype(np.int64), (3, 11)),
])
def test_torch_dynamic_axes_file_runs_at_other_sizes(tmp_path: Any, name: str, factory: Any, make: Any,
                                                     new_shape: tuple[int, ...]) -> None:
    """torch's shape arithmetic (Shape/Gather/Concat/Reshape...) is evaluated at run time, so a file exported
    with dynamic axes runs at new batch and sequence sizes. (torch's legacy exporter bakes the sizes of
    nn.MultiheadAttention's reshapes into the file, so its encoder is only checked at the export size.)"""
    torch.manual_seed(0)
    model = factory().eval()
    x = make()
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(x),), str(path), input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False,
                          dynamic_axes={"x": {0: "b", 1: "t"} if x.ndim == 2 else {0: "b"}, "y": {0: "b"}})
    loaded = rm.onnx.load(str(path))
    x2 = (RNG.integers(0, 23, new_shape) if x.dtype == np.int64 else RNG.standard_normal(new_shape)).astype(x.dtype)
    with torch.no_grad():
        want = model(torch.from_numpy(x2)).numpy()
    np.testing.assert_allclose(loaded(rm.tensor(x2)).numpy(), want, rtol=1e-5, atol=1e-5)

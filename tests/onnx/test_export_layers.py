"""Every nn layer alone: exported, checked, run in onnxruntime at two batch sizes (and two sequence
lengths where the layer has one), matching rumus to 1e-5, and read back by rm.onnx.load."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _helpers import export_and_compare

import rumus as rm
from rumus import nn

RNG = np.random.default_rng(0)


def _feat(c: int) -> Any:
    return lambda b, t: [RNG.standard_normal((b, c)).astype(np.float32)]


def _img(c: int, h: int = 9) -> Any:
    return lambda b, t: [RNG.standard_normal((b, c, h, h)).astype(np.float32)]


def _seq(c: int) -> Any:
    return lambda b, t: [RNG.standard_normal((b, t, c)).astype(np.float32)]


BATCH = {"x": {0: "batch"}}
BATCH_SEQ = {"x": {0: "batch", 1: "seq"}}

LAYERS: list[tuple[str, Any, Any, Any]] = [
    ("linear", lambda: nn.Linear(6, 5), _feat(6), BATCH),
    ("linear_seq", lambda: nn.Linear(6, 5), _seq(6), BATCH_SEQ),
    ("relu", nn.ReLU, _feat(6), BATCH),
    ("sigmoid", nn.Sigmoid, _feat(6), BATCH),
    ("tanh", nn.Tanh, _feat(6), BATCH),
    ("softmax", lambda: nn.Softmax(-1), _feat(6), BATCH),
    ("log_softmax", lambda: nn.LogSoftmax(-1), _feat(6), BATCH),
    ("gelu", nn.GELU, _feat(6), BATCH),
    ("gelu_tanh", lambda: nn.GELU("tanh"), _feat(6), BATCH),
    ("silu", nn.SiLU, _feat(6), BATCH),
    ("leaky_relu", lambda: nn.LeakyReLU(0.2), _feat(6), BATCH),
    ("softplus", lambda: nn.Softplus(beta=2.0, threshold=3.0), _feat(6), BATCH),
    ("elu", lambda: nn.ELU(0.7), _feat(6), BATCH),
    ("relu6", nn.ReLU6, _feat(6), BATCH),
    ("mish", nn.Mish, _feat(6), BATCH),
    ("dropout_eval", lambda: nn.Dropout(0.5), _feat(6), BATCH),
    ("identity", nn.Identity, _feat(6), BATCH),
    ("flatten", nn.Flatten, _img(3), BATCH),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), _img(3), BATCH),
    ("conv2d_groups_dil", lambda: nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2), _img(4), BATCH),
    ("conv2d_same", lambda: nn.Conv2d(3, 4, 4, padding="same"), _img(3), BATCH),
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), lambda b, t: [RNG.standard_normal((b, 3, 9)).astype(np.float32)],
     BATCH),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), _img(3), BATCH),
    ("max_pool2d", lambda: nn.MaxPool2d(2), _img(3, 8), BATCH),
    ("max_pool2d_pad", lambda: nn.MaxPool2d(3, stride=2, padding=1), _img(3), BATCH),
    ("avg_pool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1), _img(3), BATCH),
    ("adaptive_avg_pool2d", lambda: nn.AdaptiveAvgPool2d(1), _img(3), BATCH),
    ("batch_norm2d", lambda: nn.BatchNorm2d(3), _img(3), BATCH),
    ("batch_norm1d", lambda: nn.BatchNorm1d(6), _feat(6), BATCH),
    ("layer_norm", lambda: nn.LayerNorm(6), _seq(6), BATCH_SEQ),
    ("group_norm", lambda: nn.GroupNorm(2, 4), _img(4), BATCH),
    ("rms_norm", lambda: nn.RMSNorm(6), _seq(6), BATCH_SEQ),
]


def _randomize_bn(m: Any) -> None:
    for name, b in m.named_buffers():
        if "running" in name:
            arr = RNG.uniform(0.5, 1.5, b.shape).astype(np.float32)
            rm._math.copy_into(b, rm.tensor(arr))


@pytest.mark.parametrize("name,factory,make,dynamic", LAYERS, ids=[x[0] for x in LAYERS])
def test_layer_matches_onnxruntime(tmp_path: Any, name: str, factory: Any, make: Any, dynamic: Any) -> None:
    rm.manual_seed(0)
    model = factory()
    _randomize_bn(model)
    export_and_compare(model, make, tmp_path / f"{name}.onnx", dynamic, [(13, 17), (3, 5)])


def test_embedding_matches_onnxruntime(tmp_path: Any) -> None:
    model = nn.Embedding(20, 6)
    make = lambda b, t: [RNG.integers(0, 20, (b, t)).astype(np.int64)]  # noqa: E731
    export_and_compare(model, make, tmp_path / "emb.onnx", BATCH_SEQ, [(13, 17), (3, 5)])


def test_multihead_attention_with_causal_mask(tmp_path: Any) -> None:
    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.attn(x, x, x, need_weights=False, is_causal=True)[0]

    export_and_compare(Attn(), _seq(8), tmp_path / "mha.onnx", BATCH_SEQ, [(13, 17), (3, 5)])


def test_initializers_are_named_by_state_dict_keys(tmp_path: Any) -> None:
    import onnx
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 7 * 7, 2))
    model.eval()
    rm.onnx.export(model, (rm.randn(2, 3, 9, 9),), str(tmp_path / "m.onnx"))
    names = [i.name for i in onnx.load(str(tmp_path / "m.onnx")).graph.initializer]
    keys = [k for k in model.state_dict() if "num_batches" not in k]
    assert set(keys) <= set(names)
    assert len(names) == len(set(names))


class _Loss(nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any, t: Any) -> Any:
        return self.fn(x, t)


LOSSES: list[tuple[str, Any, str]] = [
    ("mse", nn.MSELoss(), "f"), ("l1", nn.L1Loss(), "f"), ("smooth_l1", nn.SmoothL1Loss(), "f"),
    ("huber", nn.HuberLoss(), "f"), ("bce_logits", nn.BCEWithLogitsLoss(), "p"),
    ("cross_entropy", nn.CrossEntropyLoss(), "i"),
    ("cross_entropy_smooth", nn.CrossEntropyLoss(label_smoothing=0.1), "i"), ("nll", nn.NLLLoss(), "i"),
    ("mse_sum", nn.MSELoss(reduction="sum"), "f"),
]


@pytest.mark.parametrize("name,fn,target", LOSSES, ids=[x[0] for x in LOSSES])
def test_loss_matches_onnxruntime(tmp_path: Any, name: str, fn: Any, target: str) -> None:
    """Mean reductions divide by a count that follows the dynamic batch (a frozen 1/n would be wrong)."""
    def make(b: int, t: int) -> list[np.ndarray]:
        x = RNG.standard_normal((b, 5)).astype(np.float32)
        y = {"f": lambda: RNG.standard_normal((b, 5)).astype(np.float32),
             "p": lambda: RNG.uniform(0, 1, (b, 5)).astype(np.float32),
             "i": lambda: RNG.integers(0, 5, (b,)).astype(np.int64)}[target]()
        return [x, y]
    export_and_compare(_Loss(fn), make, tmp_path / f"{name}.onnx", {"x": {0: "b"}, "t": {0: "b"}}, [(7, 0), (3, 0)],
                       names=("x", "t"))


def test_var_std_follow_dynamic_axes(tmp_path: Any) -> None:
    class Stats(nn.Module):
        def forward(self, x: Any) -> Any:
            return rm.add(rm.var(x, dim=(0, 1)), rm.std(x, dim=1, keepdim=True).sum(0).reshape(-1))
    export_and_compare(Stats(), _seq(6), tmp_path / "stats.onnx", BATCH_SEQ, [(13, 17), (3, 5)])


def test_attention_with_key_padding_mask_input(tmp_path: Any) -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: Any, pad: Any) -> Any:
            return self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]

    def make(b: int, t: int) -> list[np.ndarray]:
        pad = np.zeros((b, t), dtype=bool)
        pad[:, -2:] = True
        return [RNG.standard_normal((b, t, 8)).astype(np.float32), pad]
    dyn = {"x": {0: "b", 1: "t"}, "pad": {0: "b", 1: "t"}}
    export_and_compare(Masked(), make, tmp_path / "kpm.onnx", dyn, [(13, 17), (3, 5)], names=("x", "pad"))


def test_transformer_block(tmp_path: Any) -> None:
    rm.manual_seed(0)
    export_and_compare(nn.TransformerBlock(8, 2, dropout=0.1), _seq(8), tmp_path / "block.onnx", BATCH_SEQ,
                       [(13, 17), (3, 5)])

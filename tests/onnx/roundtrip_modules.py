"""The hand-written half of the round-trip table (tests/onnx/roundtrip.py): each nn layer and functional that
models call, as a tiny model with its inputs at a batch size, exported with a dynamic batch (and sequence
where the layer has one) and checked at the example's batch and another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import rumus as rm
import rumus.nn.functional as F
from rumus import nn



@dataclass(frozen=True)
class Case:
    """One round trip: a model, its inputs at a batch size, the axes exported as dynamic. The example batch
    is a size no weight of the tiny models has (dynamic axes are recognized by size)."""

    name: str
    family: str  # the op or layer this case covers (a row of the coverage table)
    make: Callable[[], nn.Module]
    inputs: Callable[[int], list[np.ndarray]]  # batch size -> the model's inputs
    batches: tuple[int, ...] = (0,)  # the first is the example the export traces; the others check dynamic axes
    dynamic: dict[int, dict[int, str]] = field(default_factory=dict)  # input index -> {axis: symbol}
    skip_ort: bool = False  # onnxruntime's float32 is off for this sample (roundtrip.ORT_ILL_CONDITIONED)


class Fn(nn.Module):
    """A functional (or a chain of them) as a model."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


S = -1  # in an input's shape: the sequence length, which follows the batch (b + 4), so both axes vary


def _shape(b: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return (b, *(b + 4 if d == S else d for d in shape))


def _f(*shape: int, lo: float = -2.0, hi: float = 2.0) -> Callable[[int], np.ndarray]:
    """A float32 input with a leading batch dim."""
    return lambda b: np.random.default_rng(b + len(shape)).uniform(lo, hi, _shape(b, shape)).astype(np.float32)


def _i(high: int, *shape: int) -> Callable[[int], np.ndarray]:
    return lambda b: np.random.default_rng(b + 7).integers(0, high, _shape(b, shape)).astype(np.int64)


def _in(*makers: Callable[[int], np.ndarray]) -> Callable[[int], list[np.ndarray]]:
    return lambda b: [m(b) for m in makers]


B = {0: "batch"}
BS = {0: "batch", 1: "seq"}


def case(name: str, make: Callable[[], nn.Module], *inputs: Callable[[int], np.ndarray],
         dynamic: dict[int, dict[int, str]] | None = None, family: str | None = None,
         batches: tuple[int, ...] = (13, 4)) -> Case:
    dyn = {i: dict(B) for i in range(len(inputs))} if dynamic is None else dynamic
    return Case(name, family or name, make, _in(*inputs), batches, dyn)


def fn(f: Callable[..., Any]) -> Callable[[], nn.Module]:
    return lambda: Fn(f)


class _Rnn(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: Any) -> Any:
        out, h = self.rnn(x)
        return (out, *h) if isinstance(h, tuple) else (out, h)


class _Attn(nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.attn, self.causal = nn.MultiheadAttention(8, 2, batch_first=True), causal

    def forward(self, x: Any) -> Any:
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        return self.attn(x, x, x, need_weights=False, is_causal=self.causal, attn_mask=mask)[0]


def _bn(m: nn.Module) -> nn.Module:
    """Running statistics away from 0/1, so the exported normalisation is really checked."""
    for key, b in m.named_buffers():
        if "running" in key:
            rm._math.copy_into(b, rm.tensor(np.random.default_rng(1).uniform(0.5, 1.5, b.shape).astype(np.float32)))
    return m


MODULE_CASES: list[Case] = [
    case("nn.Linear", lambda: nn.Linear(6, 5), _f(6)),
    case("nn.Linear (3-D input)", lambda: nn.Linear(6, 5), _f(S, 6), dynamic={0: BS}, family="nn.Linear"),
    case("nn.Bilinear", lambda: nn.Bilinear(4, 3, 5), _f(4), _f(3)),
    case("nn.Conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), _f(3, 9)),
    case("nn.Conv2d", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), _f(3, 9, 9)),
    case("nn.Conv2d (groups, dilation)", lambda: nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2), _f(4, 9, 9),
         family="nn.Conv2d"),
    case("nn.Conv2d (padding='same')", lambda: nn.Conv2d(3, 4, 4, padding="same"), _f(3, 9, 9), family="nn.Conv2d"),
    case("nn.ConvTranspose1d", lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1), _f(3, 9)),
    case("nn.ConvTranspose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
         _f(3, 7, 7)),
    case("nn.BatchNorm1d", lambda: _bn(nn.BatchNorm1d(6)), _f(6)),
    case("nn.BatchNorm2d", lambda: _bn(nn.BatchNorm2d(3)), _f(3, 5, 5)),
    case("nn.LayerNorm", lambda: nn.LayerNorm(6), _f(S, 6), dynamic={0: BS}),
    case("nn.RMSNorm", lambda: nn.RMSNorm(6), _f(S, 6), dynamic={0: BS}),
    case("nn.GroupNorm", lambda: nn.GroupNorm(2, 4), _f(4, 5, 5)),
    case("nn.InstanceNorm2d", lambda: nn.InstanceNorm2d(3, affine=True), _f(3, 5, 5)),
    case("nn.MaxPool1d", lambda: nn.MaxPool1d(2), _f(3, 8)),
    case("nn.MaxPool2d", lambda: nn.MaxPool2d(3, stride=2, padding=1), _f(3, 9, 9)),
    case("nn.AvgPool1d", lambda: nn.AvgPool1d(2), _f(3, 8)),
    case("nn.AvgPool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1), _f(3, 9, 9)),
    case("nn.AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(1), _f(3, 6, 6)),
    case("nn.AdaptiveAvgPool2d (2x2)", lambda: nn.AdaptiveAvgPool2d(2), _f(3, 6, 6), family="nn.AdaptiveAvgPool2d"),
    case("nn.AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d(1), _f(3, 6, 6)),
    case("nn.Embedding", lambda: nn.Embedding(20, 6), _i(20, S), dynamic={0: BS}),
    case("nn.MultiheadAttention", lambda: _Attn(False), _f(S, 8), dynamic={0: BS}),
    case("nn.MultiheadAttention (causal)", lambda: _Attn(True), _f(S, 8), dynamic={0: BS},
         family="nn.MultiheadAttention"),
    case("nn.TransformerEncoderLayer", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True),
         _f(S, 8), dynamic={0: BS}),
    case("nn.TransformerBlock", lambda: nn.TransformerBlock(8, 2, dropout=0.1), _f(S, 8), dynamic={0: BS}),
    case("nn.LSTM", lambda: _Rnn(nn.LSTM(4, 6, batch_first=True)), _f(S, 4), dynamic={0: BS}),
    case("nn.LSTM (2 layers, bidirectional)",
         lambda: _Rnn(nn.LSTM(4, 6, num_layers=2, batch_first=True, bidirectional=True)), _f(S, 4),
         dynamic={0: BS}, family="nn.LSTM"),
    case("nn.GRU", lambda: _Rnn(nn.GRU(4, 6, batch_first=True)), _f(S, 4), dynamic={0: BS}),
    case("nn.RNN", lambda: _Rnn(nn.RNN(4, 6, batch_first=True)), _f(S, 4), dynamic={0: BS}),
    case("nn.Dropout (eval)", lambda: nn.Dropout(0.5), _f(6)),
    case("nn.Identity", nn.Identity, _f(6)),
    case("nn.Flatten", nn.Flatten, _f(3, 4, 4)),
    case("nn.Unflatten", lambda: nn.Unflatten(1, (2, 3)), _f(6)),
    case("nn.PixelShuffle", lambda: nn.PixelShuffle(2), _f(8, 3, 3)),
    case("nn.ZeroPad2d", lambda: nn.ZeroPad2d((1, 2, 0, 1)), _f(3, 4, 4)),
    case("nn.ReflectionPad2d", lambda: nn.ReflectionPad2d(1), _f(3, 4, 4)),
    case("nn.Upsample (nearest)", lambda: nn.Upsample(scale_factor=2, mode="nearest"), _f(3, 4, 4)),
    case("nn.Upsample (bilinear)", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), _f(3, 4, 4),
         family="nn.Upsample (nearest)"),
    case("nn.PReLU", lambda: nn.PReLU(), _f(6)),
    case("nn.GLU", lambda: nn.GLU(), _f(6)),
    case("nn.Hardtanh", lambda: nn.Hardtanh(-0.5, 0.5), _f(6)),
    case("nn.ReLU6", nn.ReLU6, _f(6, lo=-8.0, hi=8.0)),
    case("nn.Softmin", lambda: nn.Softmin(-1), _f(6)),
    case("nn.Threshold", lambda: nn.Threshold(0.1, -1.0), _f(6)),
    *[case(f"nn.{m}", getattr(nn, m), _f(6)) for m in
      ("ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Mish", "ELU", "CELU", "SELU", "LeakyReLU", "Softplus",
       "Softsign", "Hardswish", "Hardsigmoid", "LogSigmoid", "Tanhshrink")],
    case("nn.Softmax", lambda: nn.Softmax(-1), _f(6)),
    case("nn.LogSoftmax", lambda: nn.LogSoftmax(-1), _f(6)),
    # functionals and tensor methods
    case("F.scaled_dot_product_attention", fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
         _f(2, 5, 4), _f(2, 6, 4), _f(2, 6, 4)),
    case("F.scaled_dot_product_attention (causal)",
         fn(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True)), _f(2, S, 4),
         dynamic={0: {0: "batch", 2: "seq"}},
         family="F.scaled_dot_product_attention"),
    case("F.normalize", fn(lambda x: F.normalize(x, dim=-1)), _f(6)),
    case("F.pad (constant)", fn(lambda x: F.pad(x, (1, 2), value=0.5)), _f(3, 4)),
    case("F.interpolate (nearest)", fn(lambda x: F.interpolate(x, scale_factor=2.0)), _f(3, 4, 4)),
    case("F.one_hot", fn(lambda i: F.one_hot(i, 7)), _i(7, 4)),
    case("F.cosine_similarity", fn(lambda a, b: F.cosine_similarity(a, b, dim=-1)), _f(6), _f(6)),
    case("matmul", fn(lambda a, b: a @ b), _f(4, 5), _f(5, 3)),
    case("bmm", fn(rm.bmm), _f(4, 5), _f(5, 3), family="matmul"),
    case("matmul (broadcast weight)", fn(lambda a: a @ rm.ones(5, 2)), _f(4, 5), family="matmul"),
    case("einsum", fn(lambda a, b: rm.einsum("bij,bjk->bik", a, b)), _f(4, 5), _f(5, 3)),
    case("sum / mean / amax", fn(lambda x: (x.sum(1), x.mean(-1, keepdim=True), x.amax(1))), _f(4, 5),
         family="reductions"),
    case("var / std", fn(lambda x: (x.var(1), x.std(-1, keepdim=True))), _f(4, 5), family="reductions"),
    case("max / min with indices", fn(lambda x: (*x.max(1), *x.min(-1))), _f(4, 5), family="reductions"),
    case("argmax / argmin", fn(lambda x: (x.argmax(1), x.argmin(-1))), _f(4, 5), family="reductions"),
    case("logsumexp", fn(lambda x: rm.logsumexp(x, 1)), _f(4, 5), family="reductions"),
    case("norm", fn(lambda x: rm.norm(x, dim=-1)), _f(4, 5), family="reductions"),
    case("all / any", fn(lambda x: ((x > 0).all(1), (x > 1).any(-1))), _f(4, 5), family="reductions (all / any)"),
    case("cumsum", fn(lambda x: rm.cumsum(x, 1)), _f(4, 5)),
    case("cumprod", fn(lambda x: rm.cumprod(x, 1)), _f(4, lo=0.5, hi=1.5), family="cumsum"),
    case("cat", fn(lambda a, b: rm.cat([a, b * 2], 1)), _f(3), _f(2), family="cat / stack"),
    case("stack", fn(lambda a, b: rm.stack([a, b], 1)), _f(3), _f(3), family="cat / stack"),
    case("split", fn(lambda x: rm.split(x, [2, 3], 1)), _f(5), family="split / chunk / unbind"),
    case("chunk", fn(lambda x: x.chunk(3, -1)), _f(6), family="split / chunk / unbind"),
    case("unbind", fn(lambda x: x.unbind(1)), _f(3, 2), family="split / chunk / unbind"),
    case("x[:, 1:4:2]", fn(lambda x: x[:, 1:4:2]), _f(6), family="indexing"),
    case("x[..., -1]", fn(lambda x: x[..., -1]), _f(3, 4), family="indexing"),
    case("x[:, None]", fn(lambda x: x[:, None] + 1), _f(3), family="indexing"),
    case("x[:, idx] (tensor)", fn(lambda x, i: x[:, i[0]]), _f(6), _i(6, 3), family="indexing"),
    case("x[mask-free gather]", fn(lambda x, i: rm.gather(x, 1, i)), _f(6), _i(6, 3), family="indexing"),
    case("index_select", fn(lambda x, i: rm.index_select(x, 1, i[0])), _f(6), _i(6, 3), family="indexing"),
    case("take_along_dim", fn(lambda x, i: rm.take_along_dim(x, i, 1)), _f(6), _i(6, 3), family="indexing"),
    case("topk", fn(lambda x: x.topk(3, dim=1)), _f(6), family="sorting"),
    case("sort", fn(lambda x: x.sort(1)), _f(6), family="sorting"),
    case("argsort", fn(lambda x: x.argsort(1)), _f(6), family="sorting"),
    case("where", fn(lambda x: rm.where(x > 0, x, x * 0.1)), _f(6), family="where / masked_fill"),
    case("masked_fill", fn(lambda x: x.masked_fill(x < 0, -1.5)), _f(6), family="where / masked_fill"),
    case("masked_fill (-inf mask, softmax)", fn(lambda x: x.masked_fill(x < -1, float("-inf")).softmax(-1)), _f(6),
         family="where / masked_fill"),
    case("reshape / view / permute", fn(lambda x: x.reshape(x.shape[0], 2, 3).permute(2, 0, 1).contiguous()),
         _f(6), family="views"),
    case("transpose / flatten / squeeze", fn(lambda x: x.transpose(1, 2).flatten(1).unsqueeze(0).squeeze(0)),
         _f(2, 3), family="views"),
    case("expand / repeat", fn(lambda x: (x[:, :, None].expand(-1, -1, 3), x.repeat(1, 2))), _f(3), family="views"),
    case("flip / roll", fn(lambda x: (x.flip(1), x.roll(1, 1))), _f(5), family="views"),
    case("tril / triu", fn(lambda x: (x.tril(), x.triu(1))), _f(4, 4), family="views"),
    case("arange of the length", fn(lambda x: x + rm.arange(x.shape[-1]).float()), _f(4, S),
         dynamic={0: {0: "batch", 2: "seq"}}, family="creation"),
    case("zeros / ones / full_like", fn(lambda x: x + rm.zeros(x.shape) + rm.ones_like(x) + rm.full_like(x, 2.0)),
         _f(4), family="creation"),
    case("clamp / abs / pow", fn(lambda x: (x.clamp(-1, 1), x.abs(), x ** 2, 2 ** x)), _f(4), family="arithmetic"),
    case("int / bool casts", fn(lambda x: ((x * 3).long(), (x > 0).float(), x.to(rm.float64))), _f(4),
         family="arithmetic"),
    case("integer arithmetic", fn(lambda i: (i * 3 + 1, i // 2, i % 3)), _i(9, 4), family="arithmetic"),
    case("F.linear (no bias)", fn(lambda x: F.linear(x, rm.ones(3, 4))), _f(4), family="nn.Linear"),
    case("F.embedding", fn(lambda i: F.embedding(i, rm.arange(40).float().reshape(10, 4))), _i(10, 3),
         family="nn.Embedding"),
]

"""FlashAttention: fused, tiled attention that never holds an [L, S] score matrix.

    flash_attention(q, k, v, bias, key_bias)  -> (out [B, H, L, D], lse [B, H, L])
    flash_attention_backward(q, k, v, out, dout, lse, bias, key_bias) -> (dq, dk, dv)

q [B, H, L, D], k and v [B, H, S, D] (one head dim, D <= 128). The scores are

    s[b,h,i,j] = scale * q[b,h,i] . k[b,h,j] + bias[b,h,i,j] + key_bias[b,j]     (-inf where j > i if is_causal)

bias is additive and broadcastable to [B, H, L, S] (a mask as 0 / -inf, or an ALiBi-style bias); key_bias
is the key-padding mask as an additive [B, S] bias (broadcastable to it). Callers with no mask pass 0-d
zeros: a constant added to every score leaves the softmax unchanged (lse includes it). The causal mask is
top-left aligned (PyTorch's `is_causal`). lse[b,h,i] = log sum_j exp(s[b,h,i,j]) is kept for the backward,
in the inputs' dtype (ops never mix float dtypes). float16 and bfloat16 inputs are computed in float32 and
rounded once on store; their lse is rounded too, so the backward's exp(s - lse) scales a row's probabilities
by exp(e) with |e| <= |lse| * 2^-11 (float16) or 2^-8 (bfloat16): a relative error of ~0.1-1% in the
gradients, the order of the rounding of every score in the composite path under autocast.

Dropout zeroes probability P[b,h,i,j] with the counter-based hash of the dropout op (ops/nn.py) at element
index ((b * H + h) * L + i) * S + j of the [B, H, L, S] probability matrix, so flash_attention(seed=s) drops
exactly what `dropout(softmax(scores), seed=s)` drops on the reference path; the survivors are scaled by
1 / (1 - p). A row whose every score is -inf (fully masked) gives out = 0 and lse = -inf (as FlashAttention
does; the composite path gives NaN there).

The backward recomputes P tile by tile from q, k and lse (FlashAttention-2): D[i] = dout[i] . out[i],
dP = dout v^T (times the dropout mask), dS = P * (dP - D), dq = scale dS k, dk = scale dS^T q,
dv = P_dropped^T dout. No gradient flows to the biases (the core takes the composite path when one needs it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, bfloat16, float16, float32, float64
from ..errors import ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape
from .nn import check_dropout_attrs, dropout_keep

MAX_HEAD_DIM = 128  # the GPU kernels keep a query row and its accumulator in registers
FLASH_DTYPES: tuple[DType, ...] = (float32, float64, float16, bfloat16)  # lse in the inputs' dtype (docstring)


# ---- shape rules ----------------------------------------------------------------------------------------

def _broadcastable(name: str, what: str, got: Shape, to: Shape) -> None:
    if len(got) > len(to) or any(g not in (1, t) for g, t in zip(reversed(got), reversed(to))):
        raise ShapeError(f"{name}: {what} of shape {tuple(got)} does not broadcast to {tuple(to)}")


def _check(name: str, shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    q, k, v = (tuple(s) for s in shapes[:3])
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ShapeError(f"{name}: q, k, v must be 4-D [batch, heads, seq, head_dim], got {q}, {k}, {v}")
    B, H, L, D = q
    S = k[2]
    if k[:2] != (B, H) or k[3] != D or v != k:
        raise ShapeError(f"{name}: q {q}, k {k}, v {v} do not fit: k and v must be [{B}, {H}, S, {D}]")
    if not 1 <= D <= MAX_HEAD_DIM:
        raise ShapeError(f"{name}: head_dim {D} is outside 1..{MAX_HEAD_DIM}; use the composite "
                         f"scaled_dot_product_attention for larger heads")
    if L == 0 or S == 0:
        raise ShapeError(f"{name}: needs at least one query and one key, got L = {L}, S = {S}")
    bias, key_bias = (tuple(s) for s in shapes[-2:])
    _broadcastable(name, "bias", bias, (B, H, L, S))
    _broadcastable(name, "key_bias (key padding)", key_bias, (B, S))
    check_dropout_attrs(name, "dropout_p", attrs)
    return B, H, L, S, D


def _forward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    B, H, L, S, D = _check("flash_attention", shapes, attrs)
    return [(B, H, L, D), (B, H, L)]


def _backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    q, k, v, out, dout, lse, bias, key_bias = (tuple(s) for s in shapes)
    B, H, L, S, D = _check("flash_attention_backward", [q, k, v, bias, key_bias], attrs)
    if out != q or dout != q or lse != q[:3]:
        raise ShapeError(f"flash_attention_backward: out {out} and dout {dout} must be {q}, lse {lse} must be "
                         f"{q[:3]}")
    return [q, k, v]


def _two(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0], dtypes[0]]


def _three(dtypes: Sequence[DType], attrs: Mapping[str, Any]) -> list[DType]:
    return [dtypes[0], dtypes[0], dtypes[0]]


# ---- float64 references ---------------------------------------------------------------------------------

def default_scale(head_dim: int, scale: float | None) -> float:
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _key_bias4(key_bias: np.ndarray) -> np.ndarray:
    """[B, S] (or broadcastable to it) as [B, 1, 1, S]."""
    kb = key_bias.reshape((1,) * (2 - key_bias.ndim) + key_bias.shape)
    return kb[:, None, None, :]


def attention_probs(q: np.ndarray, k: np.ndarray, bias: np.ndarray, key_bias: np.ndarray, is_causal: bool,
                    scale: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(P [B, H, L, S], lse [B, H, L]); fully masked rows give P = 0 and lse = -inf."""
    s = (q @ np.swapaxes(k, -1, -2)) * default_scale(q.shape[-1], scale) + bias + _key_bias4(key_bias)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    dead = ~np.isfinite(m)
    e = np.exp(s - np.where(dead, 0.0, m))
    total = e.sum(axis=-1, keepdims=True)
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, total))
    with np.errstate(divide="ignore"):
        lse = np.where(dead, -np.inf, np.log(np.where(dead, 1.0, total)) + np.where(dead, 0.0, m))[..., 0]
    return p, lse


def dropout_scale(shape: Shape, p: float, seed: int, offset: int) -> np.ndarray:
    """keep / (1 - p) over the [B, H, L, S] probability matrix (ones when p = 0)."""
    if p == 0.0:
        return np.ones(shape)
    keep = dropout_keep(int(np.prod(shape)), p, seed, offset).reshape(shape)
    out: np.ndarray = keep * (1.0 / (1.0 - p))
    return out


def flash_attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray, key_bias: np.ndarray,
                              is_causal: bool = False, scale: float | None = None, dropout_p: float = 0.0,
                              seed: int = 0, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    p, lse = attention_probs(q, k, bias, key_bias, is_causal, scale)
    return (p * dropout_scale(p.shape, dropout_p, seed, offset)) @ v, lse


def flash_attention_backward_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, out: np.ndarray,
                                       dout: np.ndarray, lse: np.ndarray, bias: np.ndarray, key_bias: np.ndarray,
                                       is_causal: bool = False, scale: float | None = None, dropout_p: float = 0.0,
                                       seed: int = 0, offset: int = 0) -> tuple[np.ndarray, ...]:
    """Exact float64 gradients; out and lse are recomputed rather than read (the kernels read them)."""
    p, _ = attention_probs(q, k, bias, key_bias, is_causal, scale)
    drop = dropout_scale(p.shape, dropout_p, seed, offset)
    c = default_scale(q.shape[-1], scale)
    dv = np.swapaxes(p * drop, -1, -2) @ dout
    dp = (dout @ np.swapaxes(v, -1, -2)) * drop
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return (ds @ k) * c, (np.swapaxes(ds, -1, -2) @ q) * c, dv


# ---- samples --------------------------------------------------------------------------------------------

# (B, H, L, S, D): head dims 32/64/128 and odd ones, L != S both ways, size-1 everything.
CASES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 2, 5, 7, 32), (2, 1, 6, 6, 64), (1, 1, 3, 9, 128), (1, 1, 1, 1, 5), (2, 2, 7, 4, 33),
)


def _masks(rng: np.random.Generator, B: int, H: int, L: int, S: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    bias, key_bias = np.zeros(()), np.zeros(())
    if kind in ("bias", "both"):
        bias = rng.uniform(-1, 1, (L, S) if kind == "bias" else (B, 1, L, S))
        if S > 1:  # a masked entry, never a whole row (-inf outputs do not compare; tests/nn cover those rows)
            bias[..., -1, :1] = -np.inf
    if kind in ("keypad", "both"):
        key_bias = np.zeros((B, S))
        key_bias[:, S // 2 + 1:] = -np.inf  # padding at the end of each sequence
        if B > 1:
            key_bias[1, :] = 0.0
    return bias, key_bias


def _attr_sets() -> list[tuple[str, dict[str, Any]]]:
    return [("none", {}), ("none", {"is_causal": True}), ("bias", {"scale": 0.3}), ("keypad", {}),
            ("both", {"is_causal": True}), ("none", {"dropout_p": 0.3, "seed": 7, "offset": 5}),
            ("keypad", {"is_causal": True, "dropout_p": 0.5, "seed": 2 ** 32 - 1, "offset": 2 ** 32 - 9})]


def _inputs(rng: np.random.Generator, case: tuple[int, ...]) -> list[np.ndarray]:
    B, H, L, S, D = case
    return [rng.uniform(-1, 1, (B, H, L, D)), rng.uniform(-1, 1, (B, H, S, D)), rng.uniform(-1, 1, (B, H, S, D))]


def _forward_inputs(rng: np.random.Generator) -> Iterator[tuple[str, dict[str, Any], list[np.ndarray]]]:
    """(name, attrs, [q, k, v, bias, key_bias]) for every case and attribute set, drawn from rng one at a time."""
    for case in CASES:
        B, H, L, S, _ = case
        for kind, attrs in _attr_sets():
            q, k, v = _inputs(rng, case)
            yield f"{case}/{kind}", attrs, [q, k, v, *_masks(rng, B, H, L, S, kind)]


def _forward_samples(rng: np.random.Generator) -> list[Sample]:
    # grad=False: two outputs (out, lse), which the suite's gradient check does not take; the
    # gradients are checked through flash_attention_backward's samples, whose reference is exact
    return [Sample(inputs, attrs, grad=False, name=name) for name, attrs, inputs in _forward_inputs(rng)]


def _backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for name, attrs, (q, k, v, bias, key_bias) in _forward_inputs(rng):
        o, lse = flash_attention_reference(q, k, v, bias, key_bias, **attrs)
        dout = rng.uniform(-1, 1, o.shape)
        out.append(Sample([q, k, v, o, dout, lse, bias, key_bias], attrs, grad=False, name=name))
    return out


def _errors(backward: bool) -> Any:
    def gen() -> list[ErrorSample]:
        z = np.zeros

        def args(q: Shape, k: Shape, v: Shape, bias: Shape = (), kb: Shape = ()) -> list[np.ndarray]:
            extra = [z(q), z(q), z(q[:3])] if backward else []
            return [z(q), z(k), z(v), *extra, z(bias), z(kb)]
        return [
            ErrorSample(args((2, 5, 4), (2, 5, 4), (2, 5, 4)), {}, ShapeError, "4-D"),
            ErrorSample(args((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 6, 4)), {}, ShapeError, "do not fit"),
            ErrorSample(args((1, 1, 2, 130), (1, 1, 2, 130), (1, 1, 2, 130)), {}, ShapeError, "head_dim 130"),
            ErrorSample(args((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), bias=(3, 4)), {}, ShapeError, "bias"),
            ErrorSample(args((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), kb=(3, 5)), {}, ShapeError, "key_bias"),
            ErrorSample(args((1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4)), {"dropout_p": 1.0}, ShapeError, "dropout_p"),
            ErrorSample(args((1, 1, 3, 4), (1, 1, 0, 4), (1, 1, 0, 4)), {}, ShapeError, "at least one query"),
        ]
    return gen


_ATTRS = {"is_causal": False, "scale": None, "dropout_p": 0.0, "seed": 0, "offset": 0}


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "flash_attention", ("q", "k", "v", "bias", "key_bias"), _forward_shape, attrs=_ATTRS, dtype=_two,
        num_outputs=2, dtypes=FLASH_DTYPES, contiguous=("bias", "key_bias"), differentiable=("q", "k", "v"),
        autocast="lower",  # PyTorch's autocast lists scaled_dot_product_attention among the lower-precision ops
        reference=flash_attention_reference, samples=_forward_samples, error_samples=_errors(False),
        tolerance={"float32": (1e-5, 1e-5)},
        tolerance_reason="sums over the head dim and over the keys in float32 (online softmax rescales the "
                         "running sum once per key tile)",
        doc="fused attention with online softmax (see rumus_contracts.ops.attention): out and the row "
            "logsumexp; causal / additive bias / key-padding masks and counter-based dropout"))
    registry.register(OpSchema(
        "flash_attention_backward", ("q", "k", "v", "out", "dout", "lse", "bias", "key_bias"), _backward_shape,
        attrs=_ATTRS, dtype=_three, num_outputs=3, dtypes=FLASH_DTYPES, contiguous=("out", "lse", "bias", "key_bias"),
        reference=flash_attention_backward_reference, samples=_backward_samples, error_samples=_errors(True),
        tolerance={"float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3), "bfloat16": (8e-2, 8e-3)},
        tolerance_reason="gradients sum products over every key (dk, dv: over every query) in float32 and "
                         "subtract D = dout . out, itself a rounded float32 sum; in float16 / bfloat16 out and "
                         "lse arrive rounded (lse scales a row's probabilities by up to exp(|lse| 2^-11), "
                         "resp. 2^-8) and dP - D cancels: PyTorch's gradient rtol, its atol / 10",
        doc="dq, dk, dv of flash_attention, recomputing the probabilities tile by tile from lse (FlashAttention-2)"))

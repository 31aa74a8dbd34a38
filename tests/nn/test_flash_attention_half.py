"""FlashAttention in float16 and bfloat16: the fused kernels (wgpu: f16 loads, bfloat16 words with atomic
half-word stores where a word is shared; cpu: float32 copies) against the float64 references taken on the
rounded inputs, and the dispatch under autocast: scaled_dot_product_attention and MultiheadAttention take
the fused op in the autocast dtype, never the [L, S] composite."""

from __future__ import annotations

import numpy as np
import pytest
from backends_under_test import devices

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus_contracts.ops.attention import flash_attention_backward_reference, flash_attention_reference

# (rtol, atol): forward = PyTorch's assert_close table; backward = the flash_attention_backward schema's
# (lse and out arrive rounded; see rumus_contracts/ops/attention.py)
FORWARD = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}
BACKWARD = {"float16": (1e-2, 1e-3), "bfloat16": (8e-2, 8e-3)}
CELLS = [pytest.param(d, t, id=f"{d}-{t}") for d in devices() for t in ("float16", "bfloat16")]


def _holds(device: str, dtype: str) -> bool:
    dev = rm.Device.parse(device)
    return getattr(rm, dtype) in rm._runtime.backend(dev.backend).capabilities(dev).dtypes


def _f64(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t.detach().to("float32").numpy(), np.float64)


def _close(got: rm.Tensor, want: np.ndarray, tol: tuple[float, float], what: str) -> None:
    np.testing.assert_allclose(_f64(got), want, rtol=tol[0], atol=tol[1], err_msg=what)


@pytest.mark.parametrize("device,dtype", CELLS)
@pytest.mark.parametrize("shape,kind,causal,p,layout", [
    # odd head dims and sequence lengths: rows of odd length share bfloat16 words with their neighbours,
    # and so does every pair of adjacent lse entries
    ((2, 3, 37, 29, 33), "none", False, 0.0, "bhsd"),
    ((1, 2, 65, 65, 64), "keypad", True, 0.0, "bshd"),
    ((2, 1, 20, 44, 5), "bias", False, 0.3, "bhsd"),
    ((1, 1, 70, 70, 128), "none", True, 0.0, "bshd"),
])
def test_fused_ops_against_the_float64_reference(device, dtype, shape, kind, causal, p, layout):
    if not _holds(device, dtype):
        pytest.skip(f"{device} holds no {dtype}")
    B, H, L, S, D = shape
    rng = np.random.default_rng(L * D)
    bias, kb = np.zeros(()), np.zeros(())
    if kind == "bias":
        bias = rng.uniform(-1, 1, (B, H, L, S))
        bias[..., 0, 0] = -np.inf
    if kind == "keypad":
        kb = np.zeros((B, S))
        kb[0, S // 2:] = -np.inf

    def put(a: np.ndarray) -> rm.Tensor:
        if layout == "bshd":  # [B, S, H, D] storage viewed as [B, H, S, D]: read in place, strided
            return rm.tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)), dtype=dtype, device=device).transpose(1, 2)
        return rm.tensor(a, dtype=dtype, device=device)

    q, k, v, g = (put(rng.uniform(-1, 1, (B, H, n, D))) for n in (L, S, S, L))
    bt, kbt = (rm.tensor(a, dtype=dtype, device=device) for a in (bias, kb))
    attrs = {"is_causal": causal, "dropout_p": p, "seed": 99, "offset": 3}
    out, lse = rm.ops.flash_attention.multi(q, k, v, bt, kbt, **attrs)
    assert out.dtype == getattr(rm, dtype) and lse.dtype == getattr(rm, dtype)
    ins = [_f64(t) for t in (q, k, v, bt, kbt)]
    o_ref, lse_ref = flash_attention_reference(*ins, **attrs)
    _close(out, o_ref, FORWARD[dtype], "out")
    _close(lse, lse_ref, FORWARD[dtype], "lse")
    grads = rm.ops.flash_attention_backward.multi(q, k, v, out, g, lse, bt, kbt, **attrs)
    want = flash_attention_backward_reference(*ins[:3], _f64(out), _f64(g), _f64(lse), *ins[3:], **attrs)
    for name, got, w in zip(("dq", "dk", "dv"), grads, want):
        assert got.dtype == getattr(rm, dtype)
        _close(got, w, BACKWARD[dtype], name)


@pytest.mark.parametrize("device,dtype", CELLS)
def test_sdpa_under_autocast_takes_the_fused_op(device, dtype):
    """float32 q, k, v under autocast: cast to the autocast dtype (flash_attention's class is "lower", as
    PyTorch's scaled_dot_product_attention), one flash_attention node, gradients back in float32."""
    if not _holds(device, dtype):
        pytest.skip(f"{device} holds no {dtype}")
    rng = np.random.default_rng(1)
    x = [rm.tensor(rng.uniform(-1, 1, (2, 4, 24, 16)), dtype="float32", device=device, requires_grad=True)
         for _ in range(3)]
    with rm.autocast(device.split(":")[0], dtype=getattr(rm, dtype)):
        out = F.scaled_dot_product_attention(*x, is_causal=True)
    assert out.dtype == getattr(rm, dtype)
    assert out.grad_fn is not None and out.grad_fn.name == "flash_attention"
    want, _ = flash_attention_reference(*[_f64(t.to(dtype)) for t in x], np.zeros(()), np.zeros(()), is_causal=True)
    _close(out, want, FORWARD[dtype], "out")
    out.float().sum().backward()
    for t in x:
        assert t.grad is not None and t.grad.dtype == rm.float32 and np.all(np.isfinite(t.grad.numpy()))


@pytest.mark.parametrize("device,dtype", CELLS)
def test_multihead_attention_under_autocast_takes_the_fused_op(device, dtype):
    if not _holds(device, dtype):
        pytest.skip(f"{device} holds no {dtype}")
    rm.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, batch_first=True).to(device)
    x = rm.tensor(np.random.default_rng(2).uniform(-1, 1, (2, 10, 32)), dtype="float32", device=device)
    pad = rm.tensor(np.arange(10)[None, :] >= np.array([[10], [6]]), device=device)  # True = padding
    with rm.autocast(device.split(":")[0], dtype=getattr(rm, dtype)):
        out, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)
    with rm.no_grad():
        ref, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)  # float32
    seen, stack = set(), [out.grad_fn]
    while stack:  # the autograd graph holds the fused op, in the autocast dtype
        node = stack.pop()
        if node is None or isinstance(node, rm.Tensor) or id(node) in seen:  # a leaf's edge is the tensor
            continue
        seen.add(id(node))
        if node.name == "flash_attention":
            break
        stack.extend(e[0] for e in node.edges if e is not None)
    else:
        raise AssertionError("no flash_attention node under autocast")
    assert out.dtype == getattr(rm, dtype)
    # three lowered GEMMs and the attention, each rounding to the autocast dtype: 4x the forward rtol
    np.testing.assert_allclose(_f64(out), _f64(ref), rtol=4 * FORWARD[dtype][0], atol=4 * FORWARD[dtype][0])

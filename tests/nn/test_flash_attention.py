"""FlashAttention through F.scaled_dot_product_attention and nn.MultiheadAttention: outputs and gradients
against the float64 reference (finite differences) and against the composite path (same dropout mask),
fully masked rows, and memory that stays O(L) on the CPU."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from backends_under_test import devices

import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus.nn._functional_attention import attend, causal_bias, mask_to_bias
from rumus_contracts.ops.attention import flash_attention_backward_reference, flash_attention_reference


DEVICES = devices()


def _qkv(rng, shape_q, shape_k, dtype="float32", device="cpu"):
    return [rm.tensor(rng.uniform(-1, 1, s), dtype=dtype, device=device, requires_grad=True)
            for s in (shape_q, shape_k, shape_k)]


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _made_by_flash(t, depth: int = 3) -> bool:
    """Whether t's graph reaches a flash_attention node within `depth` steps (views sit on top of it)."""
    nodes = [t.grad_fn]
    for _ in range(depth):
        if any(n is not None and n.name == "flash_attention" for n in nodes):
            return True
        nodes = [e[0] for n in nodes if n is not None for e in n.edges if e is not None and hasattr(e[0], "edges")]
    return False


def test_sdpa_takes_the_flash_path():
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, (1, 2, 5, 8), (1, 2, 5, 8))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.grad_fn is not None and out.grad_fn.name == "flash_attention"
    # weights wanted (and v with another head dim) keep the composite path
    v2 = rm.tensor(rng.uniform(-1, 1, (1, 2, 5, 3)), dtype="float32", requires_grad=True)
    assert F.scaled_dot_product_attention(q, k, v2).grad_fn.name != "flash_attention"


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("dropout_p", [0.0, 0.4])
def test_float64_gradients_match_finite_differences(mask, dropout_p):
    """Autograd through the flash path (cpu, float64) vs central differences of the float64 reference."""
    rng = np.random.default_rng(1)
    B, H, L, S, D = 1, 2, 4, 6, 5
    q, k, v = _qkv(rng, (B, H, L, D), (B, H, S, D), "float64")
    attn_mask, bias = None, np.zeros(())
    if mask == "bool":
        allowed = rng.uniform(size=(L, S)) > 0.3
        allowed[:, 0] = True
        attn_mask, bias = rm.tensor(allowed), np.where(allowed, 0.0, -np.inf)
    elif mask == "float":
        bias = rng.uniform(-1, 1, (B, 1, L, S))
        attn_mask = rm.tensor(bias)
    rm.manual_seed(3)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                         is_causal=mask == "causal")
    assert out.grad_fn.name == "flash_attention"
    seed = out.grad_fn.attrs["seed"]
    cot = rng.uniform(-1, 1, out.shape)
    out.backward(rm.tensor(cot))
    attrs = {"is_causal": mask == "causal", "dropout_p": dropout_p, "seed": seed}
    ins = [_np(t) for t in (q, k, v)]

    def f(args):
        return (flash_attention_reference(*args, bias, np.zeros(()), **attrs)[0] * cot).sum()

    np.testing.assert_allclose(_np(out), flash_attention_reference(*ins, bias, np.zeros(()), **attrs)[0],
                               rtol=1e-10, atol=1e-12)
    for idx, t in enumerate((q, k, v)):
        num = np.zeros_like(ins[idx])
        for j in range(num.size):
            plus, minus = [a.copy() for a in ins], [a.copy() for a in ins]
            plus[idx].reshape(-1)[j] += 1e-6
            minus[idx].reshape(-1)[j] -= 1e-6
            num.reshape(-1)[j] = (f(plus) - f(minus)) / 2e-6
        np.testing.assert_allclose(_np(t.grad), num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [
    # B, H, L, S, D, causal, masks, dropout: several tiles and query blocks, L != S both ways, odd sizes
    (1, 2, 70, 130, 64, True, "none", 0.0),
    (2, 1, 129, 33, 32, False, "both", 0.0),
    (1, 1, 40, 40, 128, True, "keypad", 0.25),
    (1, 3, 17, 65, 48, False, "bias", 0.5),
])
def test_flash_matches_the_composite_path(device, case):
    """float32 outputs and gradients equal the composite path's (softmax + dropout + matmuls), the
    dropout mask included: both draw one seed, and the flash kernel hashes the same element indices."""
    B, H, L, S, D, causal, masks, p = case
    rng = np.random.default_rng(2)
    bias_np = rng.uniform(-1, 1, (B, H, L, S)) if masks in ("bias", "both") else None
    kpm_np = np.zeros((B, S), bool)
    kpm_np[:, S // 2 + 3:] = masks in ("keypad", "both")  # True = padding

    def run(fused: bool):
        q, k, v = _qkv(np.random.default_rng(5), (B, H, L, D), (B, H, S, D), device=device)
        bias = rm.tensor(bias_np, dtype="float32", device=device) if bias_np is not None else None
        kb = mask_to_bias(rm.tensor(kpm_np, device=device), q, true_means_masked=True).reshape(B, S)
        rm.manual_seed(11)
        if fused:
            out = rm.nn._functional_attention.flash_attend(q, k, v, bias, kb, causal, p)
            assert out is not None
        else:
            total = kb.reshape(B, 1, 1, S)
            if bias is not None:
                total = total + bias
            if causal:
                total = total + causal_bias(L, S, 0, q.dtype, q.device)
            out, _ = attend(q, k, v, total, p)
        cot = rm.tensor(np.random.default_rng(6).uniform(-1, 1, (B, H, L, D)), dtype="float32", device=device)
        out.backward(cot)
        return [_np(t) for t in (out, q.grad, k.grad, v.grad)]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fully_masked_rows_give_zero_output_and_gradients(device):
    rng = np.random.default_rng(3)
    q, k, v = _qkv(rng, (2, 1, 3, 8), (2, 1, 4, 8), device=device)
    kb = np.zeros((2, 4))
    kb[1] = -np.inf  # the second batch entry sees no key at all
    out, lse = rm.ops.flash_attention.multi(q, k, v, rm.tensor(np.zeros(()), dtype="float32", device=device),
                                            rm.tensor(kb, dtype="float32", device=device))
    ref, ref_lse = flash_attention_reference(*[_np(t) for t in (q, k, v)], np.zeros(()), kb)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-5, atol=1e-6)
    assert np.all(_np(out)[1] == 0.0) and np.all(np.isneginf(_np(lse)[1]))
    np.testing.assert_allclose(_np(lse)[0], ref_lse[0], rtol=1e-5, atol=1e-6)
    out.sum().backward()
    for t in (q, k, v):
        g = _np(t.grad)
        assert np.all(np.isfinite(g)) and np.all(g[1] == 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_op_matches_float64_reference_with_dropout(device):
    rng = np.random.default_rng(4)
    B, H, L, S, D = 1, 2, 37, 70, 64
    arrs = [rng.uniform(-1, 1, s) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D))]
    attrs = {"is_causal": True, "dropout_p": 0.3, "seed": 99, "offset": 12}
    bias, kb = rng.uniform(-1, 1, (L, S)), np.zeros(())
    o, lse = flash_attention_reference(*arrs, bias, kb, **attrs)
    dout = rng.uniform(-1, 1, o.shape)
    want = flash_attention_backward_reference(*arrs, o, dout, lse, bias, kb, **attrs)
    ts = [rm.tensor(a, dtype="float32", device=device) for a in (*arrs, o, dout, lse, bias, kb)]
    got = rm.ops.flash_attention_backward.multi(*ts, **attrs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), w, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_multihead_attention_without_weights_matches_with_weights(device):
    """need_weights=False runs flash_attention (key padding as an [N, S] bias); the output equals the
    composite path's, dropout included (training mode, same seed)."""
    rm.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, dropout=0.2, batch_first=True).to(device)
    rng = np.random.default_rng(7)
    x = rm.tensor(rng.uniform(-1, 1, (2, 9, 32)), dtype="float32", device=device)
    kpm = rm.tensor(np.array([[False] * 9, [False] * 6 + [True] * 3]), device=device)
    causal = rm.tensor(np.triu(np.ones((9, 9), bool), 1), device=device)
    results = []
    for need in (False, True):
        rm.manual_seed(21)
        out, w = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=need)
        assert (w is None) == (not need)
        out.sum().backward()
        results.append((_np(out), _np(mha.in_proj_weight.grad)))
        mha.in_proj_weight.grad = None
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=2e-4, atol=2e-5)


def test_cpu_memory_stays_linear_in_sequence_length():
    """Forward + backward at L = S = 2048 allocate far less than one [L, S] float32 matrix (16 MiB)."""
    L, D = 2048, 32
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng, (1, 1, L, D), (1, 1, L, D))
    tracemalloc.start()
    try:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.sum().backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.grad_fn.name == "flash_attention"
    assert peak < L * L * 4 / 8, f"peak {peak} bytes: an [L, S] buffer was allocated"
    assert np.all(np.isfinite(_np(q.grad)))


@pytest.mark.skipif("wgpu:0" not in DEVICES, reason="wgpu unavailable")
def test_wgpu_forward_and_backward_never_wait_for_the_host():
    """Forward + backward record their dispatches without one host sync (issue 10: no round trip in an op)."""
    backend = rm._runtime.backend("wgpu")
    rng = np.random.default_rng(9)
    q, k, v = _qkv(rng, (1, 2, 33, 16), (1, 2, 20, 16), device="wgpu:0")
    grad = rm.tensor(rng.uniform(-1, 1, (1, 2, 33, 16)), dtype="float32", device="wgpu:0")
    rm.synchronize("wgpu:0")
    before = backend.stats(0)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
    out.backward(grad)
    after = backend.stats(0)
    assert out.grad_fn.name == "flash_attention"
    assert after["syncs"] == before["syncs"]
    assert after["dispatches"] - before["dispatches"] >= 4  # forward, row pass, dK/dV pass, dQ pass
    assert np.all(np.isfinite(_np(q.grad))) and np.abs(_np(k.grad)).sum() > 0


def test_three_dim_inputs_with_a_batched_mask():
    """[N, L, E] inputs with an [N, L, S] float mask run fused (as one head) and match the composite path."""
    rng = np.random.default_rng(10)
    q, k, v = _qkv(rng, (3, 5, 8), (3, 7, 8))
    mask = rm.tensor(rng.uniform(-1, 1, (3, 5, 7)), dtype="float32")
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert _made_by_flash(out)
    ref, _ = attend(q, k, v, mask)
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    g = _np(q.grad)
    q.grad = None
    ref.sum().backward()
    np.testing.assert_allclose(g, _np(q.grad), rtol=1e-4, atol=1e-6)


def test_cached_decoding_matches_full_causal_attention():
    """forward_cached (fused, a causal bias offset by start_pos over strided cache views) token by token
    equals the composite full-sequence causal attention."""
    rm.manual_seed(1)
    mha = nn.MultiheadAttention(16, 2, batch_first=True)
    x = rm.tensor(np.random.default_rng(12).uniform(-1, 1, (2, 6, 16)), dtype="float32")
    with rm.no_grad():
        full, _ = mha(x, x, x, attn_mask=rm.tensor(np.triu(np.ones((6, 6), bool), 1)), need_weights=True)
        cache = mha.new_cache(2, 8)
        prefix = mha.forward_cached(x[:, :3], cache, 0)
        steps = [mha.forward_cached(x[:, t:t + 1], cache, t) for t in range(3, 6)]
    got = np.concatenate([_np(prefix), *[_np(s) for s in steps]], axis=1)
    np.testing.assert_allclose(got, _np(full), rtol=1e-5, atol=1e-6)

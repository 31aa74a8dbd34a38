"""The tiled FlashAttention kernels against the float64 reference at sizes that cut their blocks (rows per
workgroup, key tiles) unevenly: sequence lengths that are not multiples of a block, head dims 32-128 (80: a
padded bucket), every mask kind and dropout, inputs read in place from [B, S, H, D] tensors, and the O(S)
memory of the wgpu backward. The forward and backward ops are called directly: the dispatch through sdpa
and MultiheadAttention is tested in test_flash_attention.py."""

from __future__ import annotations

import numpy as np
import pytest
from backends_under_test import devices

import rumus as rm
from rumus.nn import functional as F
from rumus_contracts.ops.attention import flash_attention_backward_reference, flash_attention_reference

DEVICES = devices()
WGPU = [d for d in DEVICES if d.startswith("wgpu")]


def _masks(rng, B, H, L, S, kind):
    bias, kb = np.zeros(()), np.zeros(())
    if kind in ("bias", "both"):
        bias = rng.uniform(-1, 1, (B, H, L, S))
        bias[..., 0, S - 1] = -np.inf  # one masked score, never a whole row
    if kind in ("keypad", "both"):
        kb = np.zeros((B, S))
        kb[0, S // 2 + 1:] = -np.inf
    return bias, kb


def _check(device, B, H, L, S, D, kind="none", causal=False, p=0.0, layout="bhsd", seed=0):
    """flash_attention and flash_attention_backward on `device` against the float64 references."""
    rng = np.random.default_rng(seed)
    qkv = [rng.uniform(-1, 1, (B, H, n, D)) for n in (L, S, S)]
    bias, kb = _masks(rng, B, H, L, S, kind)
    attrs = {"is_causal": causal, "dropout_p": p, "seed": 1234 + seed, "offset": 77}
    o, lse = flash_attention_reference(*qkv, bias, kb, **attrs)
    dout = rng.uniform(-1, 1, o.shape)
    want = flash_attention_backward_reference(*qkv, o, dout, lse, bias, kb, **attrs)

    def put(a):
        if layout == "bshd":  # stored [B, S, H, D] as a model's projections are, viewed as [B, H, S, D]
            return rm.tensor(np.ascontiguousarray(a.transpose(0, 2, 1, 3)), dtype="float32",
                             device=device).transpose(1, 2)
        return rm.tensor(a, dtype="float32", device=device)

    q, k, v, g = (put(a) for a in (*qkv, dout))
    bt, kbt = (rm.tensor(a, dtype="float32", device=device) for a in (bias, kb))
    out, lse_got = rm.ops.flash_attention.multi(q, k, v, bt, kbt, **attrs)
    np.testing.assert_allclose(out.numpy(), o, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(lse_got.numpy(), lse, rtol=1e-5, atol=2e-5)
    got = rm.ops.flash_attention_backward.multi(q, k, v, out, g, lse_got, bt, kbt, **attrs)
    for name, a, w in zip(("dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(a.numpy(), w, rtol=1e-3, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seq", [1, 7, 63, 64, 65, 200])
@pytest.mark.parametrize("causal", [False, True])
def test_sequence_lengths_that_cut_the_blocks(device, seq, causal):
    _check(device, 1, 2, seq, seq, 64, causal=causal)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [32, 64, 80, 128])
def test_head_dims(device, dim):
    _check(device, 2, 1, 70, 45, dim, causal=dim != 80)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["bias", "keypad", "both"])
def test_masks_and_dropout(device, kind):
    _check(device, 2, 2, 66, 130, 64, kind=kind, causal=kind == "both", p=0.3)


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_without_masks_at_a_long_sequence(device):
    _check(device, 1, 1, 1000, 1000, 64, causal=True, p=0.2, seed=3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [64, 80])
def test_inputs_read_in_place_from_bshd_tensors(device, dim):
    _check(device, 2, 3, 65, 65, dim, kind="keypad", causal=True, layout="bshd")


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_on_bshd_views_copies_nothing_around_the_kernel(device):
    """The LM's attention: q, k, v as [B, S, H, D] projections transposed to [B, H, S, D]. The forward runs
    flash_attention on the views themselves (no contiguous copy of q, k or v first)."""
    rng = np.random.default_rng(5)
    x = [rm.tensor(rng.uniform(-1, 1, (2, 33, 4, 16)), dtype="float32", device=device, requires_grad=True)
         for _ in range(3)]
    q, k, v = (t.transpose(1, 2) for t in x)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    node = out.grad_fn
    assert node is not None and node.name == "flash_attention"
    for edge, leaf in zip(node.edges[:3], x):  # each input edge is the transpose view of a leaf, no copy
        assert edge is not None and edge[0].name == "permute" and edge[0].edges[0][0] is leaf
    want, _ = flash_attention_reference(*[t.detach().numpy().astype(np.float64).transpose(0, 2, 1, 3) for t in x],
                                        np.zeros(()), np.zeros(()), is_causal=True)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-4, atol=2e-5)


@pytest.mark.skipif(not WGPU, reason="wgpu unavailable")
def test_wgpu_backward_allocates_no_seq_by_seq_buffer():
    """Forward + backward at S = 2048 (one head) on wgpu: the buffer pool grows by far less than one
    [S, S] float32 matrix (16 MiB), inputs and gradients included."""
    backend = rm._runtime.backend("wgpu")
    dev = rm.Device.parse("wgpu:0")
    S, D = 2048, 32
    rng = np.random.default_rng(6)
    backend.empty_cache(dev)
    q, k, v = (rm.tensor(rng.uniform(-1, 1, (1, 1, S, D)), dtype="float32", device="wgpu:0", requires_grad=True)
               for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()
    rm.synchronize(dev)
    held = backend.pool_stats(dev)["allocated_bytes"]
    assert out.grad_fn.name == "flash_attention"
    assert held < S * S * 4 / 4, f"the pool holds {held} bytes: an [S, S] buffer was allocated"
    assert np.all(np.isfinite(q.grad.numpy()))

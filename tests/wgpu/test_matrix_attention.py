"""FlashAttention's float16 forward on matrix units (matrix_attention.py): its WGSL, and float16 attention
against the float64 reference on whichever path the device takes (the scalar kernel on wgpu-native and on
devices without subgroup matrices, the matrix units on a Dawn device with them); the gradients too, since
the backward reads the forward's out and lse."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus.nn import functional as F
from rumus_contracts.ops.attention import flash_attention_backward_reference, flash_attention_reference
from rumus_wgpu.matrix_attention import BC, generate, shared_bytes
from rumus_wgpu.pipelines import parse_bindings
from tests.wgpu.wgpu_required import wgpu_or_skip

VULKAN_WORKGROUP_BYTES = 49152  # NVIDIA's Vulkan limit, the smallest among the drivers with matrix units


KINDS = {"forward": ["storage", "storage"] + ["read-only-storage"] * 3 + ["uniform"],
         "dkdv": ["storage", "storage"] + ["read-only-storage"] * 5 + ["uniform"],
         "dq": ["storage"] + ["read-only-storage"] * 5 + ["uniform"]}
# result matrices per block: scores (and dP) BC / 16 tiles over D / 16 steps; P V, dV, dK, dQ: D / 16 tiles over
# BC / 16 steps
PRODUCTS = {"forward": 2, "dkdv": 4, "dq": 3}


@pytest.mark.parametrize("kernel", sorted(KINDS))
def test_wgsl_bindings_and_workgroup_memory(kernel: str) -> None:
    src = generate(64, kernel)
    assert [k for _, k in parse_bindings(src)] == KINDS[kernel]
    assert src.count("subgroupMatrixMultiplyAccumulate") == PRODUCTS[kernel] * (BC // 16) * (64 // 16)
    assert "{{" not in src
    assert shared_bytes(64) <= VULKAN_WORKGROUP_BYTES


def _dev() -> Any:
    backend, _ = wgpu_or_skip()
    dev = backend.device(0)
    if "shader-f16" not in dev.features:
        pytest.skip("the wgpu device has no shader-f16")
    return dev


# (B, H, L, S, causal, q from a [B, L, H, D] tensor transposed in place)
CASES = [(2, 3, 200, 200, True, False), (1, 2, 128, 320, False, False), (2, 2, 96, 96, True, True),
         (1, 1, 300, 130, True, False), (1, 2, 64, 17, False, True)]


@pytest.mark.parametrize(("B", "H", "L", "S", "causal", "transposed"), CASES)
def test_float16_attention_matches_the_reference(B: int, H: int, L: int, S: int, causal: bool,
                                                 transposed: bool) -> None:
    dev = _dev()
    rng = np.random.default_rng(L + S)
    D = 64
    qn = rng.standard_normal((B, H, L, D)).astype(np.float16)
    kn, vn = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(2))
    gn = rng.standard_normal((B, H, L, D)).astype(np.float16)
    if transposed:
        q = rm.tensor(np.ascontiguousarray(qn.transpose(0, 2, 1, 3)), device="wgpu", requires_grad=True)
        qv = q.transpose(1, 2)
    else:
        q = qv = rm.tensor(qn, device="wgpu", requires_grad=True)
    k, v = (rm.tensor(a, device="wgpu", requires_grad=True) for a in (kn, vn))
    out = F.scaled_dot_product_attention(qv, k, v, is_causal=causal)
    assert out.grad_fn is not None and out.grad_fn.name == "flash_attention"
    before = out.numpy().copy()
    out.backward(rm.tensor(gn, device="wgpu"))
    np.testing.assert_array_equal(out.numpy(), before)  # the backward writes its own buffers only
    f64 = [a.astype(np.float64) for a in (qn, kn, vn)]
    none = np.zeros(())
    want, _ = flash_attention_reference(*f64, none, none, is_causal=causal, scale=None, dropout_p=0.0,
                                        seed=0, offset=0)
    got = out.numpy().astype(np.float64)
    # P is rounded to float16 before P V (as FlashAttention does) and out once more: a few 2^-11 relative
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3 * np.abs(want).max())
    # the gradients against the float64 reference (torch's float16 attention tolerance)
    o64, lse64 = flash_attention_reference(*f64, none, none, is_causal=causal, scale=None, dropout_p=0.0,
                                           seed=0, offset=0)
    wants = flash_attention_backward_reference(*f64, o64, gn.astype(np.float64), lse64, none, none,
                                               is_causal=causal, scale=None, dropout_p=0.0, seed=0, offset=0)
    grad_q = q.grad.numpy()
    if transposed:
        grad_q = grad_q.transpose(0, 2, 1, 3)
    for g, ref in zip((grad_q, k.grad.numpy(), v.grad.numpy()), wants):
        np.testing.assert_allclose(g.astype(np.float64), ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())
    took = any(isinstance(key, tuple) and key[:1] == ("flash_attention_matrix",) for key in dev.programs._cache)
    from rumus_wgpu.matrix_units import available
    assert took == available(dev)  # the matrix units where the device has them, the scalar kernel elsewhere


@pytest.mark.parametrize("kernel", sorted(KINDS))
def test_no_declaration_shadows_a_loop_variable(kernel: str) -> None:
    """The unrolled per-lane names (key0, query0, ...) must not shadow a loop's `j0` (which once made every
    later column of the block wrong on the GPU)."""
    src = generate(64, kernel)
    loops = set(re.findall(r"for \(var (\w+) =", src))
    assert loops and not [n for n in re.findall(r"\blet (\w+)", src) if n in loops]

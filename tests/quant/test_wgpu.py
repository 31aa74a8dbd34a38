"""The WGSL kernels (shaders/quant.wgsl) against the CPU ones and float64: QLinear, GPTQ / AWQ models
on the wgpu device, and byte-exact packing on the GPU (SPEC C / D words identical to the CPU's)."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable
from rumus_contracts import RumusError
from rumus_contracts.ops import quant as layout

try:
    rm.zeros(1, device="wgpu").numpy()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)


def _mlp(device: str) -> rm.nn.Sequential:
    rm.manual_seed(5)
    return rm.nn.Sequential(rm.nn.LayerNorm(96), rm.nn.Linear(96, 40), rm.nn.GELU(),
                            rm.nn.Linear(40, 7)).to(device)


@pytest.mark.parametrize("scheme,g,method", [("q8", 32, "rtn"), ("int4", 32, "rtn"), ("int4", 32, "gptq"),
                                             ("int4", 16, "awq")])
def test_quantized_model_on_wgpu_matches_cpu(scheme: str, g: int, method: str) -> None:
    xh = np.random.default_rng(0).standard_normal((9, 96)).astype(np.float32)
    outs, deq = {}, {}
    for dev in ("cpu", "wgpu"):
        model = rm.quant.quantize(_mlp(dev), scheme, g, method, calib=[rm.tensor(xh, device=dev)])
        assert model[1].qweight.device.backend == dev
        outs[dev] = model(rm.tensor(xh, device=dev)).numpy()
        deq[dev] = model[1].dequantized_weight().numpy()
    if method == "rtn":  # the same words on both: dequantization is exact on both backends
        np.testing.assert_array_equal(deq["wgpu"], deq["cpu"])
    # GPTQ / AWQ calibrate on each backend's own activations (float32 rounding differs in the last bits),
    # which may move a code by one step: their outputs agree less tightly than RTN's
    tol = 1e-5 if method == "rtn" else 2e-3
    np.testing.assert_allclose(outs["wgpu"], outs["cpu"], rtol=1e-4, atol=tol)


def _hard_weights(rng: np.random.Generator, k: int, n: int, bs: int) -> np.ndarray:
    """Columns built to hit every rounding case of SPEC C / D packing: random magnitudes over many
    binades, exact ties of 127 x / absmax (absmax 127 with half-integers) and of v / s + zp (range
    15 from 0: s = 1, halves), ranges around int4's 1e-10 cut, subnormals, huge values, zero and
    constant columns."""
    cols = []
    for j in range(n):
        kind = j % 8
        if kind == 0:
            c = rng.standard_normal(k) * 10.0 ** rng.integers(-30, 30)
        elif kind == 1:  # q8 ties: 127 * x / 127 = x, half-integers
            c = (rng.integers(-254, 255, k) / 2.0)
            c[::bs] = 127.0
        elif kind == 2:  # int4 ties: min 0, max 15 per group, halves between
            c = rng.integers(0, 31, k) / 2.0
            c[::8] = 0.0
            c[1::8] = 15.0
        elif kind == 3:  # range straddling int4's flat cut (1e-10)
            c = 0.5 + rng.choice([0.0, 1e-10, 2e-10, 5e-11], k) * rng.integers(0, 2, k)
        elif kind == 4:  # subnormals and the smallest normals
            c = rng.standard_normal(k) * 1e-39
        elif kind == 5:  # near the largest float
            c = rng.uniform(-3.4e38, 3.4e38, k)
        elif kind == 6:
            c = np.full(k, 0.0 if j % 16 == 6 else -2.75)
        else:  # f16 scale rounding: absmax / 127 near f16 halfway points and the f16 subnormal range
            c = rng.standard_normal(k) * rng.choice([1e-5, 3e-3, 65504.0 * 127 / 4, 1.0])
        cols.append(c)
    return np.stack(cols, axis=1).astype(np.float32)


@pytest.mark.parametrize("bs", [16, 32, 64, 128, 256])
def test_q8_packing_on_wgpu_is_byte_exact(bs: int) -> None:
    w = _hard_weights(np.random.default_rng(bs), 3 * bs + 5, 96, bs)  # K % bs != 0: padded blocks
    with np.errstate(over="ignore"):  # the scale of a near-3.4e38 block is f16 inf, on purpose
        want = layout.q8_pack(w, bs).view(np.int32)
    cpu = rm.ops.q8_quantize(rm.tensor(w), block_size=bs).numpy()
    got = rm.ops.q8_quantize(rm.tensor(w, device="wgpu"), block_size=bs).numpy()
    np.testing.assert_array_equal(cpu, want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("g", [8, 16, 32, 64, 128, 256])
def test_int4_packing_on_wgpu_is_byte_exact(g: int) -> None:
    w = _hard_weights(np.random.default_rng(g), 2 * g + 3, 96, g)
    with np.errstate(over="ignore"):  # max - min of a near-3.4e38 group is inf, on purpose
        want = [a.view(np.uint32) if a.dtype == np.int32 else a.astype(np.float32).view(np.uint32)
                for a in layout.int4_quantize_reference(w, group_size=g)]
    for dev in ("cpu", "wgpu"):
        got = rm.ops.int4_quantize.multi(rm.tensor(w, device=dev), group_size=g)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.numpy().view(np.uint32), b)


@pytest.mark.parametrize("op,attrs", [("q8_quantize", {"block_size": 32}), ("int4_quantize", {"group_size": 32})])
def test_packing_nan_or_inf_on_wgpu_is_refused_like_on_cpu(op: str, attrs: dict[str, int]) -> None:
    w = np.ones((40, 3), np.float32)
    w[33, 1] = np.nan if op == "q8_quantize" else np.inf
    for dev in ("cpu", "wgpu"):
        with pytest.raises(RumusError, match="NaN or inf"):
            getattr(rm.ops, op).multi(rm.tensor(w, device=dev), **attrs)
    # the refusal is per call: a finite weight packs right after it
    ok = np.ones((40, 3), np.float32)
    words = getattr(rm.ops, op).multi(rm.tensor(ok, device="wgpu"), **attrs)[0]
    want = (layout.q8_quantize_reference(ok, block_size=32) if op == "q8_quantize"
            else layout.int4_quantize_reference(ok, group_size=32)[0])
    np.testing.assert_array_equal(words.numpy(), want)

"""The WGSL kernels (shaders/quant.wgsl) against the CPU ones and float64: QLinear, GPTQ / AWQ models
on the wgpu device, and the refusal to pack on the GPU (no silent fallback)."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable
from rumus_contracts import KernelNotFound

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


def test_packing_on_wgpu_is_refused_not_silently_done_elsewhere() -> None:
    with pytest.raises(KernelNotFound):
        rm.ops.q8_quantize(rm.zeros(16, 2, device="wgpu"), block_size=16)

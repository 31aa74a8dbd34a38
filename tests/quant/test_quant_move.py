"""A quantized model moves between devices like any other: quantize on the host, serve on the GPU. The packed
q8 / int4 words travel as they are (the packing is the same on every backend), so the moved model computes the
same output; the float64 dequantized product is the reference."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable
from rumus_contracts import DTypeError

try:
    rm.zeros(1, device="wgpu").numpy()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)


def _model() -> rm.nn.Sequential:
    rm.manual_seed(11)
    return rm.nn.Sequential(rm.nn.Linear(96, 40), rm.nn.GELU(), rm.nn.Linear(40, 7))


def _words(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t._storage.backend.to_numpy(t._arg)).copy()


@pytest.mark.parametrize("scheme,g", [("q8", 32), ("q8", 128), ("int4", 32), ("int4", 16)])
def test_a_model_quantized_on_the_host_runs_on_wgpu_with_the_same_words_and_output(scheme: str, g: int) -> None:
    xh = np.random.default_rng(1).standard_normal((9, 96)).astype(np.float32)
    model = rm.quant.quantize(_model(), scheme, g)
    want = model(rm.tensor(xh)).numpy()
    words = [_words(m.qweight) for m in (model[0], model[2])]
    deq = [m.dequantized_weight().numpy().astype(np.float64) for m in (model[0], model[2])]
    moved = model.to("wgpu")
    for m, w in zip((moved[0], moved[2]), words):
        assert m.qweight.device.backend == "wgpu" and m.qweight.dtype.is_packed
        np.testing.assert_array_equal(_words(m.qweight), w)  # the packing moved bit for bit
        assert all(t is None or t.device.backend == "wgpu" for t in (m.scales, m.zeros, m.bias))
    got = moved(rm.tensor(xh, device="wgpu")).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # float64 reference: x @ dequant(W0)^T + b0 -> GELU -> @ dequant(W1)^T + b1
    import torch
    h = xh.astype(np.float64) @ deq[0].T + model[0].bias.numpy()  # type: ignore[union-attr]
    h = torch.nn.functional.gelu(torch.tensor(h)).numpy()
    ref = h @ deq[1].T + model[2].bias.numpy()  # type: ignore[union-attr]
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
    back = moved.to("cpu")
    np.testing.assert_array_equal(_words(back[0].qweight), words[0])
    np.testing.assert_array_equal(back(rm.tensor(xh)).numpy(), want)


def test_a_packed_tensor_moves_but_does_not_cast() -> None:
    q = rm.quant.quantize(_model(), "q8", 32)[0].qweight
    moved = q.to("wgpu")
    assert moved.dtype == q.dtype and moved.shape == q.shape
    assert np.array_equal(_words(moved.to("cpu")), _words(q))
    with pytest.raises(DTypeError):
        q.to(rm.float32)  # a dtype change of packed words has no meaning: dequantize instead

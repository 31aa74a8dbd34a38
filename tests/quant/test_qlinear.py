"""QLinear and rm.quant.quantize on a small MLP: outputs, AWQ folding, safetensors round trip, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import RumusError


def _mlp() -> rm.nn.Sequential:
    return rm.nn.Sequential(rm.nn.LayerNorm(64), rm.nn.Linear(64, 48), rm.nn.ReLU(), rm.nn.Linear(48, 10))


@pytest.fixture(scope="module")
def trained() -> tuple[rm.nn.Sequential, rm.Tensor]:
    rm.manual_seed(0)
    return _mlp(), rm.randn(64, 64)


def _copy(model: rm.nn.Sequential) -> rm.nn.Sequential:
    other = _mlp()
    other.load_state_dict(model.state_dict())
    return other


@pytest.mark.parametrize("scheme,g,method", [("q8", 32, "rtn"), ("int4", 32, "rtn"), ("int4", 16, "gptq"),
                                             ("int4", 32, "awq")])
def test_quantized_model_computes_with_its_dequantized_weights(trained: tuple[rm.nn.Sequential, rm.Tensor],
                                                               scheme: str, g: int, method: str) -> None:
    model, x = trained
    qm = rm.quant.quantize(_copy(model), scheme, g, method, calib=[x])
    assert all(type(qm[i]).__name__ == "QLinear" for i in (1, 3))
    # the same network in float64 with the dequantized weights
    h = x.numpy().astype(np.float64)
    ln = qm[0]
    mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * ln.weight.numpy() + ln.bias.numpy()
    for i in (1, 3):
        layer = qm[i]
        if layer.input_scale is not None:
            h = h * layer.input_scale.numpy()
        h = h @ layer.dequantized_weight().numpy().T.astype(np.float64) + layer.bias.numpy()
        if i == 1:
            h = np.maximum(h, 0)
    np.testing.assert_allclose(qm(x).numpy(), h, rtol=1e-4, atol=1e-4)
    err = float(np.mean((qm(x).numpy() - model(x).numpy()) ** 2))
    assert err < (1e-4 if scheme == "q8" else 5e-3)
    if method == "awq":  # the first layer's 1/s went into the LayerNorm in front of it
        assert qm[1].input_scale is None and not np.allclose(ln.weight.numpy(), model[0].weight.numpy())


def test_gptq_beats_rtn_on_the_layer_output(trained: tuple[rm.nn.Sequential, rm.Tensor]) -> None:
    model, x = trained
    want = model(x).numpy()
    errs = {m: float(np.mean((rm.quant.quantize(_copy(model), "int4", 32, m, calib=[x])(x).numpy() - want) ** 2))
            for m in ("rtn", "gptq")}
    assert errs["gptq"] < errs["rtn"]


def test_act_order_runs_and_keeps_the_group_layout(trained: tuple[rm.nn.Sequential, rm.Tensor]) -> None:
    model, x = trained
    qm = rm.quant.quantize(_copy(model), "int4", 16, "gptq", calib=[x], act_order=True)
    assert qm[1].scales.shape == (4, 48)
    assert float(np.mean((qm(x).numpy() - model(x).numpy()) ** 2)) < 5e-3


@pytest.mark.parametrize("scheme,method", [("q8", "rtn"), ("int4", "awq")])
def test_safetensors_roundtrip_is_bit_exact(tmp_path: Path, trained: tuple[rm.nn.Sequential, rm.Tensor],
                                            scheme: str, method: str) -> None:
    model, x = trained
    qm = rm.quant.quantize(_copy(model), scheme, 32, method, calib=[x])
    path = tmp_path / "q.safetensors"
    rm.quant.save_quantized(qm, path)
    back = rm.quant.load_quantized(_mlp(), path)
    assert type(back[1]).__name__ == "QLinear"
    np.testing.assert_array_equal(back(x).numpy(), qm(x).numpy())
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as f:
        assert f.get_tensor("1.qweight").dtype == np.uint32
        assert f.metadata()["rumus.quant.1"] == f"{scheme}:32:64:48"


def test_bad_arguments_are_refused(trained: tuple[rm.nn.Sequential, rm.Tensor]) -> None:
    model, x = trained
    with pytest.raises(RumusError, match="calibration"):
        rm.quant.quantize(_copy(model), "int4", 32, "gptq")
    with pytest.raises(RumusError, match="int4"):
        rm.quant.quantize(_copy(model), "q8", 32, "awq", calib=[x])
    with pytest.raises(RumusError, match="sizes"):
        rm.quant.quantize(_copy(model), "int4", 12)


@pytest.mark.parametrize("scheme", ["q8", "int4"])
def test_backward_gives_the_input_gradient_and_a_bias_gradient_only(scheme: str) -> None:
    rm.manual_seed(3)
    lin = rm.nn.Linear(40, 24)
    q = rm.quant.QLinear.from_linear(lin, 16 if scheme == "int4" else 32, scheme)
    x = rm.randn(5, 40, requires_grad=True)
    g = np.random.default_rng(0).standard_normal((5, 24))
    (q(x) * rm.tensor(g.astype(np.float32))).sum().backward()
    w = q.dequantized_weight().numpy().astype(np.float64)  # [out, in]
    np.testing.assert_allclose(x.grad.numpy(), g @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q.bias.grad.numpy(), g.sum(0), rtol=1e-5, atol=1e-5)
    assert not any(t.requires_grad for t in q.buffers())


def test_loading_into_a_model_it_does_not_fit_is_refused(tmp_path: Path,
                                                         trained: tuple[rm.nn.Sequential, rm.Tensor]) -> None:
    from rumus_contracts import FormatError
    model, x = trained
    path = tmp_path / "q.safetensors"
    rm.quant.save_quantized(rm.quant.quantize(_copy(model), "q8", 32), path)
    bigger = rm.nn.Sequential(rm.nn.LayerNorm(64), rm.nn.Linear(64, 48), rm.nn.ReLU(), rm.nn.Linear(48, 10),
                              rm.nn.LayerNorm(10))
    with pytest.raises(FormatError, match="lacks"):
        rm.quant.load_quantized(bigger, path)

"""from_float: a float MLP trained by RUMUS, converted to fixed point, keeps its accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rumus as rm
import rumus.fixed as fx
from rumus import nn
from rumus_contracts import RumusError

SCALE = 8  # 2**-8 steps; blob inputs stay within about +-4, far from the int16 limit of 128
# Stated bound: the fixed-point model's accuracy is within 2 percentage points of the float model's,
# and its outputs within 0.1 of the float outputs (a few quantization steps through two layers).
ACCURACY_BOUND = 0.02
OUTPUT_BOUND = 0.1


def blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two overlapping Gaussian blobs in 2-D, centres (-1, -1) and (1, 1), unit variance."""
    labels = rng.integers(0, 2, n)
    centres = np.where(labels[:, None] == 1, 1.0, -1.0)
    return (centres + rng.standard_normal((n, 2))).astype(np.float32), labels


def train(seed: int = 0) -> tuple[nn.Sequential, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rm.manual_seed(seed)
    x_train, y_train = blobs(400, rng)
    x_test, y_test = blobs(400, rng)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = rm.optim.Adam(model.parameters(), lr=0.02)
    xt, target = rm.tensor(x_train), rm.tensor(np.eye(2, dtype=np.float32)[y_train])
    for _ in range(150):
        loss = nn.functional.mse_loss(model(xt), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, x_test, y_test


@pytest.fixture(scope="module")
def trained() -> tuple[nn.Sequential, np.ndarray, np.ndarray]:
    return train()


def test_converted_mlp_keeps_its_accuracy(trained: tuple[nn.Sequential, np.ndarray, np.ndarray],
                                          tmp_path: Path) -> None:
    model, x_test, y_test = trained
    with rm.no_grad():
        float_pred = model(rm.tensor(x_test)).numpy().argmax(1)
    float_acc = float((float_pred == y_test).mean())
    assert float_acc > 0.85  # the blobs overlap: about 92% is the best possible

    fixed = fx.from_float(model, SCALE, inputs=x_test)
    report = fixed.report
    assert report is not None and report.n_inputs == len(x_test) and report.scale_log2 == SCALE
    assert report.rounding == "nearest_ties_to_even" and report.saturated_weights == 0
    assert report.max_abs_error is not None and report.max_abs_error < OUTPUT_BOUND
    assert "worst |fixed - float|" in report.summary()

    out = fixed(fx.quantize(x_test, SCALE))
    fixed_pred = out.fixed_i16_data().argmax(1)
    fixed_acc = float((fixed_pred == y_test).mean())
    assert abs(fixed_acc - float_acc) <= ACCURACY_BOUND
    assert np.abs(fx.dequantize(out) - model(rm.tensor(x_test)).detach().numpy()).max() == pytest.approx(
        report.max_abs_error)

    # the converted model's fixture verifies, from memory and from disk (and through the CLI)
    fixture = fixed.fixture(fx.quantize(x_test[:8], SCALE))
    assert fixture.verify().ok
    path = fixture.write(tmp_path / "blobs.json")
    assert fx.load_fixture(path) == fixture
    assert fx.verify_main([str(path)]) == 0


def test_weights_are_transposed_and_rounded(trained: tuple[nn.Sequential, np.ndarray, np.ndarray]) -> None:
    model = trained[0]
    fixed = fx.from_float(model, SCALE)
    assert fixed.report is not None and fixed.report.max_abs_error is None
    first = fixed[0]
    w = model[0].weight.detach().numpy()  # [out, in]
    assert first.weight.shape == (2, 16)  # [in, out]
    np.testing.assert_array_equal(first.weight_values(), np.rint(w.T.astype(np.float64) * 256).astype(np.int16))
    assert isinstance(fixed[1], fx.FixedReLU)


def test_rounding_ties_to_even_and_saturation() -> None:
    lin = nn.Linear(2, 1)
    with rm.no_grad():
        lin.weight.copy_(rm.tensor([[0.5 / 256, 1.5 / 256]]))  # ties: 0.5 -> 0, 1.5 -> 2
        lin.bias.copy_(rm.tensor([1000.0]))  # 1000 * 256 does not fit int16
    fixed = fx.from_float(nn.Sequential(lin), 8)
    assert fixed[0].weight_values().tolist() == [[0], [2]]
    assert fixed[0].bias_values().tolist() == [32767]
    assert fixed.report is not None and fixed.report.saturated_biases == 1


def test_unsupported_modules_are_refused() -> None:
    with pytest.raises(RumusError, match="Sigmoid"):
        fx.from_float(nn.Sequential(nn.Linear(2, 2), nn.Sigmoid()), 8)
    single = fx.from_float(nn.Linear(3, 2), 10)
    assert len(single) == 1 and single.scale_log2 == 10

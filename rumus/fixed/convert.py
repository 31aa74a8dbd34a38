"""from_float: a trained float Sequential of Linear / ReLU -> FixedSequential, with an error report.

Weights are transposed to [in, out] and rounded to nearest with ties to even (numpy's rint) at
scale 2**s, saturating to int16 (counted in the report). Biases use the same scale: the kernel adds
bias << s to the accumulator, i.e. the bias value b / 2**s, as SPEC E prescribes. This module is the
float boundary: it reads float weights once; the fixed-point model it returns never touches a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rumus_contracts import RumusError, fixed_i16

from .. import nn
from ..autograd import no_grad
from ..tensor import Tensor
from .layers import FixedLayer, FixedLinear, FixedReLU
from .sequential import FixedSequential
from .tensor import FLOAT_ROUNDING, dequantize, quantize_array, tensor


@dataclass(frozen=True)
class ConversionReport:
    """How far the fixed-point model is from the float one.

    max_abs_error / mean_abs_error compare the dequantized fixed-point outputs with the float model's
    outputs on the given inputs (None without inputs); weight_step is the quantization step 2**-s.
    """

    scale_log2: int
    rounding: str
    saturated_weights: int
    saturated_biases: int
    n_inputs: int
    saturated_inputs: int
    max_abs_error: float | None
    mean_abs_error: float | None

    @property
    def weight_step(self) -> float:
        return 1.0 / (1 << self.scale_log2)

    def summary(self) -> str:
        err = ("no inputs given" if self.max_abs_error is None else
               f"worst |fixed - float| = {self.max_abs_error:.6g} (mean {self.mean_abs_error:.3g}) on "
               f"{self.n_inputs} inputs")
        return (f"fixed_i16({self.scale_log2}), weights rounded {self.rounding}: {err}; saturated: "
                f"{self.saturated_weights} weights, {self.saturated_biases} biases, {self.saturated_inputs} "
                f"input values")


def _modules(module: Any) -> list[Any]:
    """The leaf modules in call order (nested Sequentials flattened; Identity dropped)."""
    if isinstance(module, nn.Sequential):
        return [leaf for child in module for leaf in _modules(child)]
    if isinstance(module, nn.Identity):
        return []
    return [module]


def _float_array(t: Tensor | None) -> np.ndarray | None:
    return None if t is None else t.detach().numpy().astype(np.float64)


def from_float(module: Any, scale_log2: int, inputs: Any = None) -> FixedSequential:
    """Convert `module` (Sequential of Linear / ReLU, or one Linear) at scale 2**scale_log2.

    With `inputs` ([batch, in] floats: array or float Tensor) the returned model's `report` holds the
    worst-case absolute error of the fixed-point outputs against the float model on them.
    """
    fixed_i16(scale_log2)
    layers: list[FixedLayer] = []
    sat_w = sat_b = 0
    for i, m in enumerate(_modules(module)):
        if isinstance(m, nn.ReLU):
            layers.append(FixedReLU())
        elif isinstance(m, nn.Linear):
            w, n = quantize_array(m.weight.detach().numpy().T, scale_log2)  # [out, in] -> [in, out]
            sat_w += n
            b_float = _float_array(m.bias)
            b = None
            if b_float is not None:
                b, n = quantize_array(b_float, scale_log2)
                sat_b += n
            layers.append(FixedLinear(w, b, scale_log2))
        else:
            raise RumusError(f"from_float: module {i} is a {type(m).__name__}; only Linear and ReLU have "
                             f"fixed-point layers")
    model = FixedSequential(*layers, scale_log2=scale_log2)
    n_inputs = sat_in = 0
    max_err = mean_err = None
    if inputs is not None:
        x = inputs.detach().numpy() if isinstance(inputs, Tensor) else np.asarray(inputs)
        x = x.astype(np.float64)
        from .._creation import tensor as float_tensor
        with no_grad():
            ref = module(float_tensor(x, dtype="float32")).numpy().astype(np.float64)
        q, sat_in = quantize_array(x, scale_log2)
        got = dequantize(model(tensor(q, q.shape, scale_log2)))
        diff = np.abs(got - ref)
        n_inputs = int(x.shape[0]) if x.ndim > 1 else 1
        max_err = float(diff.max()) if diff.size else 0.0
        mean_err = float(diff.mean()) if diff.size else 0.0
    model.report = ConversionReport(scale_log2, FLOAT_ROUNDING, sat_w, sat_b, n_inputs, sat_in, max_err, mean_err)
    return model

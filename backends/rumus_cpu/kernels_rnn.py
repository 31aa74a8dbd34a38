"""One Elman RNN step and its backward (rumus_contracts.ops.nn_rnn), each one call into the kernels the
composite would dispatch one by one: the GEMM with its bias epilogue, the table's add and activation,
the activation's backward from the output, linear_backward's two GEMMs and column sum. The same kernels in
the same order, so the results are the composite's bits; what goes is three dispatches and three graph
nodes per step forward, and three ops per step backward."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from .dtypes import FLOAT
from .kernels_elementwise import KERNELS as _ELEMENTWISE
from .kernels_linalg import linear, linear_backward

_TABLE: dict[str, Kernel] = {name: kernel for name, kernel, _ in _ELEMENTWISE}
_ADD = _TABLE["add"]
_ACTIVATION = {"tanh": _TABLE["tanh"], "relu": _TABLE["relu"]}
_DERIVATIVE = {"tanh": _TABLE["tanh_backward"], "relu": _TABLE["relu_backward"]}  # (grad, out) both
_NO_ATTRS: dict[str, Any] = {}


def rnn_cell(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """out = act(xw + (h @ w_hh.T + b_hh)), built in the output (elementwise kernels read each element
    before they write it)."""
    o, (xw, h, w, b) = outputs[0], inputs
    linear([o], [h, w, b], _NO_ATTRS)
    _ADD([o], [xw, o], _NO_ATTRS)
    _ACTIVATION[attrs["nonlinearity"]]([o], [o], _NO_ATTRS)


def rnn_cell_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """d xw = grad * act'(out) (relu's from the output: out > 0 exactly where the input was), then h's,
    w_hh's and b_hh's gradients from it as linear's backward computes them."""
    (gxw, gh, gw, gb), (g, h, w, out) = outputs, inputs
    _DERIVATIVE[attrs["nonlinearity"]]([gxw], [g, out], _NO_ATTRS)
    linear_backward([gh, gw, gb], [gxw, h, w], _NO_ATTRS)


KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [("rnn_cell", rnn_cell, FLOAT),
                                                        ("rnn_cell_backward", rnn_cell_backward, FLOAT)]

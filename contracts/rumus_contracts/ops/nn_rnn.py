"""One step of an Elman RNN as one op (what RNNCell and the RNN layer run per time step):

    rnn_cell(xw [rows, hidden], h [rows, hidden], w_hh [hidden, hidden], b_hh [hidden], nonlinearity)
        -> act(xw + h @ w_hh.T + b_hh)                                                   [rows, hidden]

    rnn_cell_backward(grad [rows, hidden], h, w_hh, out, nonlinearity)
        -> (d xw, d h, d w_hh, d b_hh), with d xw = grad * act'(out) and then linear_backward's three products

xw is the input's projection x @ w_ih.T + b_ih, computed for every time step at once by the RNN layer
(one linear op) and per call by RNNCell. Both ops are composites (linear, add, the activation; the
activation's backward from the output, then linear_backward) that a backend may replace with a fused
kernel: a step of a small RNN is then one graph node instead of four, and its backward one op instead of
four, which is where a training step of small tensors spends its time (the graph's Python, not the kernels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..errors import RumusError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape

NONLINEARITIES = ("tanh", "relu")


def _nonlinearity(op: str, attrs: Mapping[str, Any]) -> str:
    act = attrs["nonlinearity"]
    if act not in NONLINEARITIES:
        raise RumusError(f"{op}: nonlinearity must be 'tanh' or 'relu', got {act!r}")
    return str(act)


def _check(op: str, rows_shape: Shape, h: Shape, w: Shape, what: str) -> None:
    if len(w) != 2 or w[0] != w[1]:
        raise ShapeError(f"{op}: w_hh must be a square [hidden, hidden] matrix, got shape {w}")
    if len(h) != 2 or h[1] != w[0]:
        raise ShapeError(f"{op}: h must be [rows, {w[0]}] for w_hh {w}, got shape {h}")
    if rows_shape != h:
        raise ShapeError(f"{op}: {what} of shape {rows_shape} does not match h {h}: both are [rows, hidden]")


def _shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    xw, h, w, b = (tuple(s) for s in shapes)
    _nonlinearity("rnn_cell", attrs)
    _check("rnn_cell", xw, h, w, "xw")
    if b != (w[0],):
        raise ShapeError(f"rnn_cell: b_hh of shape {b} does not fit w_hh {w}: expected shape ({w[0]},)")
    return [h]


def _backward_shape(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
    g, h, w, out = (tuple(s) for s in shapes)
    _nonlinearity("rnn_cell_backward", attrs)
    _check("rnn_cell_backward", g, h, w, "grad")
    if out != h:
        raise ShapeError(f"rnn_cell_backward: out of shape {out} does not match h {h}")
    return [h, h, w, (w[0],)]


def _activation(act: str, v: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.tanh(v) if act == "tanh" else np.maximum(v, 0)
    return out


def _derivative(act: str, g: np.ndarray, out: np.ndarray) -> np.ndarray:
    d: np.ndarray = g * (1 - out * out) if act == "tanh" else np.where(out > 0, g, 0)
    return d


def rnn_cell_reference(xw: np.ndarray, h: np.ndarray, w: np.ndarray, b: np.ndarray,
                       nonlinearity: str = "tanh") -> np.ndarray:
    return _activation(nonlinearity, xw + h @ w.T + b)


def rnn_cell_backward_reference(g: np.ndarray, h: np.ndarray, w: np.ndarray, out: np.ndarray,
                                nonlinearity: str = "tanh") -> tuple[np.ndarray, ...]:
    d = _derivative(nonlinearity, g, out)
    return d, d @ w, d.T @ h, d.sum(axis=0)


# (rows, hidden): one row (a batch of 1, as a character RNN steps), several, a hidden size of 1, no rows
CASES: tuple[tuple[int, int], ...] = ((1, 8), (4, 6), (3, 1), (0, 3), (5, 17))


def _samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for act in NONLINEARITIES:
        for rows, hid in CASES:
            out.append(Sample([rng.uniform(-1, 1, (rows, hid)), rng.uniform(-1, 1, (rows, hid)),
                               rng.uniform(-0.5, 0.5, (hid, hid)), rng.uniform(-0.5, 0.5, hid)],
                              {"nonlinearity": act}, name=f"{act} {rows}x{hid}"))
    return out


def _backward_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for act in NONLINEARITIES:
        lo = -0.95 if act == "tanh" else 0.0  # a tanh output lies in (-1, 1), a relu output is >= 0
        for rows, hid in CASES:
            res = rng.uniform(lo, 0.95, (rows, hid))
            if act == "relu":
                res[rng.uniform(size=res.shape) < 0.3] = 0.0  # rows of units that did not fire
            out.append(Sample([rng.uniform(-1, 1, (rows, hid)), rng.uniform(-1, 1, (rows, hid)),
                               rng.uniform(-0.5, 0.5, (hid, hid)), res], {"nonlinearity": act}, grad=False,
                              name=f"{act} {rows}x{hid}"))
    return out


def _errors() -> list[ErrorSample]:
    z = np.zeros
    return [ErrorSample([z((2, 4)), z((2, 4)), z((4, 3)), z((4,))], {}, ShapeError, "square"),
            ErrorSample([z((3, 4)), z((2, 4)), z((4, 4)), z((4,))], {}, ShapeError, "does not match h"),
            ErrorSample([z((2, 4)), z((2, 4)), z((4, 4)), z((3,))], {}, ShapeError, "does not fit"),
            ErrorSample([z((2, 4)), z((2, 4)), z((4, 4)), z((4,))], {"nonlinearity": "gelu"}, RumusError,
                        "'tanh' or 'relu'")]


_TOLERANCE = {"float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "rnn_cell", ("xw", "h", "w_hh", "b_hh"), _shape, attrs={"nonlinearity": "tanh"}, autocast="lower",
        dtypes=FLOAT_DTYPES, contiguous=("xw", "h", "w_hh", "b_hh"), differentiable=("xw", "h", "w_hh", "b_hh"),
        composite=True, reference=rnn_cell_reference, samples=_samples, error_samples=_errors,
        tolerance=_TOLERANCE, tolerance_reason="sums of hidden-size products (17 in the samples), then tanh",
        doc="act(xw + h @ w_hh.T + b_hh), act tanh or relu: one step of an Elman RNN after the input's "
            "projection xw; a composite of linear, add and the activation, which a backend may fuse"))
    registry.register(OpSchema(
        "rnn_cell_backward", ("grad", "h", "w_hh", "out"), _backward_shape, attrs={"nonlinearity": "tanh"},
        num_outputs=4, dtypes=FLOAT_DTYPES, dtype=lambda dtypes, attrs: [dtypes[0]] * 4, composite=True,
        reference=rnn_cell_backward_reference, samples=_backward_samples,
        error_samples=lambda: [ErrorSample([np.zeros((2, 4)), np.zeros((2, 4)), np.zeros((4, 4)),
                                            np.zeros((3, 4))], {}, ShapeError, "out of shape")],
        tolerance=_TOLERANCE, tolerance_reason="sums of rows or hidden-size products (17 in the samples)",
        doc="the gradients of rnn_cell (xw, h, w_hh, b_hh) from its output's gradient and the output: the "
            "activation's derivative, then linear_backward's products; a composite a backend may run as one call"))

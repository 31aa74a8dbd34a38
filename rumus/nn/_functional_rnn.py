"""An Elman RNN step, act(xw + h @ w_hh.T + b_hh), as the rnn_cell op where it can be one (one graph
node, one backward op: rumus_contracts.ops.nn_rnn), and the composites that op stands for on backends
without its kernel."""

from __future__ import annotations

from .. import _math as M
from .._dispatch import COMPOSITES
from ..autograd.formulas import relu_grad, tanh_grad
from ..ops import get as _op
from ..tensor import Tensor
from . import functional as F


def rnn_step(xw: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, nonlinearity: str) -> Tensor:
    """One step: the rnn_cell op for the plain case (a bias, one float dtype, a layer a plugin's conditional
    matmul kernel would not take), else linear, add and the activation as separate ops."""
    if b_hh is not None and xw.dtype == h.dtype and xw.shape == h.shape and F._fused_linear(h, w_hh, b_hh):
        return _op("rnn_cell")(xw, h, w_hh, b_hh, nonlinearity=nonlinearity)
    return _activate(M.add(xw, F.linear(h, w_hh, b_hh)), nonlinearity)


def _activate(pre: Tensor, nonlinearity: str) -> Tensor:
    return M.tanh(pre) if nonlinearity == "tanh" else M.relu(pre)


def _rnn_cell_op(xw: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor, nonlinearity: str = "tanh") -> Tensor:
    """rnn_cell where the backend has no kernel for it: its ops one by one (each records its own node)."""
    _op("rnn_cell").schema.shape([xw.shape, h.shape, w_hh.shape, b_hh.shape], {"nonlinearity": nonlinearity})
    return _activate(M.add(xw, F.linear(h, w_hh, b_hh)), nonlinearity)


def rnn_cell_backward(g: Tensor, h: Tensor, w_hh: Tensor, out: Tensor,
                      nonlinearity: str = "tanh") -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """rnn_cell_backward's composite: the activation's derivative from the output, then linear's backward.
    Like the op, not differentiable itself (rnn_cell's formula builds create_graph's steps from core ops)."""
    _op("rnn_cell_backward").schema.shape([g.shape, h.shape, w_hh.shape, out.shape], {"nonlinearity": nonlinearity})
    d = tanh_grad(g, out) if nonlinearity == "tanh" else relu_grad(g, out)
    gh, gw, gb = _op("linear_backward").multi(d, h, w_hh)
    return d, gh, gw, gb


COMPOSITES["rnn_cell"] = _rnn_cell_op
COMPOSITES["rnn_cell_backward"] = rnn_cell_backward

"""ONNX's recurrent ops (LSTM, GRU, RNN) in rumus: what our exporter and PyTorch's emit for nn.LSTM / GRU / RNN.

ONNX packs the gates in another order than PyTorch (LSTM: i, o, f, c vs i, f, g, o; GRU: z, r, h vs r, z, n),
so the weights are re-blocked with tensor ops (they stay differentiable, an imported model fine-tunes) and the
time loop is rumus.nn.rnn's own, the one nn.LSTM runs. Variants PyTorch never emits (other activations, clip,
input_forget, GRU with linear_before_reset=0, per-sequence lengths, layout=1) are refused by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import RumusError

from .. import _creation
from .. import _math as M
from ..nn import functional as F
from ..nn.rnn import _cell_for, _run_direction
from ..tensor import Tensor
from ._interpret_host import Fn, H, T

# mode -> (gates, ONNX gate blocks in PyTorch's order, the activations PyTorch's semantics use)
_MODES: dict[str, tuple[int, tuple[int, ...], tuple[str, ...]]] = {
    "LSTM": (4, (0, 2, 3, 1), ("Sigmoid", "Tanh", "Tanh")),
    "GRU": (3, (1, 0, 2), ("Sigmoid", "Tanh")),
    "RNN_TANH": (1, (0,), ("Tanh",)),
    "RNN_RELU": (1, (0,), ("Relu",)),
}


def _to_torch_order(w: Tensor, mode: str) -> Tensor:
    gates, order, _ = _MODES[mode]
    if gates == 1:
        return w
    blocks = w.chunk(gates, 0)
    return M.cat([blocks[i] for i in order], 0)


def _mode(op_type: str, at: dict[str, Any]) -> str:
    if op_type != "RNN":
        return op_type
    acts = [str(a) for a in at.get("activations", ["Tanh"])]
    if acts and all(a == "Relu" for a in acts):
        return "RNN_RELU"
    return "RNN_TANH"


def _check(op_type: str, mode: str, at: dict[str, Any], dirs: int, direction: str) -> None:
    _, _, acts = _MODES[mode]
    given = [str(a) for a in at.get("activations", acts * dirs)]
    if given != list(acts) * dirs:
        raise RumusError(f"{op_type} with activations {given} is not supported (only PyTorch's: {list(acts) * dirs})")
    for name in ("clip", "input_forget"):
        if at.get(name):
            raise RumusError(f"{op_type} with {name}={at[name]} is not supported")
    if int(at.get("layout", 0)) != 0:
        raise RumusError(f"{op_type} with layout=1 (batch-major) is not supported; PyTorch's exporter writes layout 0")
    if op_type == "GRU" and int(at.get("linear_before_reset", 0)) != 1:
        raise RumusError("GRU with linear_before_reset=0 is not supported (PyTorch's GRU is linear_before_reset=1)")
    if direction not in ("forward", "reverse", "bidirectional") or (dirs == 2) != (direction == "bidirectional"):
        raise RumusError(f"{op_type}: direction '{direction}' does not match W's {dirs} direction(s)")


def _recurrent(op_type: str) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> list[Tensor]:
        x, w, r = T(a[0]), T(a[1]), T(a[2])

        def arg(i: int) -> Any:  # an optional input: absent, or named ""
            return a[i] if len(a) > i and a[i] is not None else None
        mode = _mode(op_type, at)
        gates = _MODES[mode][0]
        dirs, direction = w.shape[0], str(at.get("direction", "forward"))
        _check(op_type, mode, at, dirs, direction)
        steps, batch = x.shape[0], x.shape[1]
        hidden = int(at.get("hidden_size", r.shape[-1]))
        if w.shape[1] != gates * hidden or r.shape[1:] != (gates * hidden, hidden):
            raise RumusError(f"{op_type}: W {w.shape} / R {r.shape} do not fit hidden_size {hidden}")
        if arg(7) is not None and H(arg(7)).any():  # PyTorch's LSTM has no peephole connections
            raise RumusError(f"{op_type} with peephole weights (input P) is not supported")
        lens = arg(4)
        if lens is not None and not np.all(H(lens) == steps):
            raise RumusError(f"{op_type} with per-sequence lengths is not supported (every length must be {steps})")
        b, h0, c0 = arg(3), arg(5), arg(6)
        data = x.reshape(steps * batch, x.shape[2])
        cell = _cell_for(mode)
        ys: list[Tensor] = []
        finals: list[Any] = []
        for d in range(dirs):
            bias = T(b)[d] if b is not None else None
            b_ih = _to_torch_order(bias[:gates * hidden], mode) if bias is not None else None
            b_hh = _to_torch_order(bias[gates * hidden:], mode) if bias is not None else None
            zero = _creation.zeros(batch, hidden, dtype=x.dtype, device=x.device)
            h = T(h0)[d] if h0 is not None else zero
            state: Any = (h, T(c0)[d] if c0 is not None else zero) if mode == "LSTM" else h
            xw = F.linear(data, _to_torch_order(w[d], mode), b_ih)
            out, final = _run_direction(cell, xw, [batch] * steps, state, _to_torch_order(r[d], mode), b_hh,
                                        reverse=d == 1 or direction == "reverse")
            ys.append(out.reshape(steps, batch, hidden))
            finals.append(final)
        y = M.stack(ys, 1)
        if mode == "LSTM":
            return [y, M.stack([f[0] for f in finals], 0), M.stack([f[1] for f in finals], 0)]
        return [y, M.stack(finals, 0)]
    return run


RNN_OPS: dict[str, Fn] = {name: _recurrent(name) for name in ("LSTM", "GRU", "RNN")}

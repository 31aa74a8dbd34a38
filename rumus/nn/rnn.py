"""Recurrent layers: RNN, LSTM, GRU and their cells, with PyTorch's signatures, gate orders, parameter
names (weight_ih_l0, weight_hh_l1_reverse, ...) and layouts, so torch state dicts load unchanged.

They are composites of core ops (linear, sigmoid, tanh, cat), so they run on every backend and get their
gradients from the primitives. One time loop serves padded and packed input: a layer sees its input as
one 2-D tensor of rows (time-major) plus `batch_sizes` (rows per step, non-increasing). At step t only the
first batch_sizes[t] sequences advance; the others keep their state — for packed sequences that is what
makes the final state of each sequence the one at its own last step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from .. import _math as M
from ..tensor import Tensor
from . import functional as F
from ._functional_rnn import rnn_step
from . import init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

# rumus.nn star-imports these.
__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
State = Any  # a Tensor, or (h, c) for LSTM


def _rnn_cell(nonlinearity: str) -> Callable[..., Tensor]:
    def cell(xw: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
        return rnn_step(xw, h, w_hh, b_hh, nonlinearity)
    return cell


def _lstm_cell(xw: Tensor, state: tuple[Tensor, Tensor], w_hh: Tensor,
               b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    h, c = state
    i, f, g, o = M.add(xw, F.linear(h, w_hh, b_hh)).chunk(4, -1)  # PyTorch's gate order: input, forget, cell, out
    c2 = M.add(M.mul(M.sigmoid(f), c), M.mul(M.sigmoid(i), M.tanh(g)))
    return M.mul(M.sigmoid(o), M.tanh(c2)), c2


def _gru_cell(xw: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    xr, xz, xn = xw.chunk(3, -1)  # PyTorch's gate order: reset, update, new
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = M.sigmoid(M.add(xr, hr))
    z = M.sigmoid(M.add(xz, hz))
    n = M.tanh(M.add(xn, M.mul(r, hn)))  # the reset gate scales W_hn h + b_hn (PyTorch's, not the paper's)
    return M.add(n, M.mul(z, M.sub(h, n)))  # (1 - z) * n + z * h


def _cell_for(mode: str) -> Callable[..., Any]:
    cells: dict[str, Callable[..., Any]] = {"RNN_TANH": _rnn_cell("tanh"), "RNN_RELU": _rnn_cell("relu"),
                                            "LSTM": _lstm_cell, "GRU": _gru_cell}
    return cells[mode]


def _rows(state: State, n: int) -> State:
    return (state[0][:n], state[1][:n]) if isinstance(state, tuple) else state[:n]


def _merge(new: State, old: State, n: int) -> State:
    """The advanced first n rows followed by the rows that did not advance this step."""
    if isinstance(new, tuple):
        return tuple(_merge(a, b, n) for a, b in zip(new, old))
    return new if old.shape[0] == n else M.cat([new, old[n:]], 0)


def _run_direction(cell: Callable[..., Any], xw: Tensor, batch_sizes: Sequence[int], state: State, w_hh: Tensor,
                   b_hh: Tensor | None, reverse: bool) -> tuple[Tensor, State]:
    offsets = [0]
    for b in batch_sizes:
        offsets.append(offsets[-1] + b)
    outs: list[Tensor] = [xw] * len(batch_sizes)
    steps = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    for t in steps:
        n = batch_sizes[t]
        new = cell(xw[offsets[t]:offsets[t + 1]], _rows(state, n), w_hh, b_hh)
        outs[t] = new[0] if isinstance(new, tuple) else new
        state = _merge(new, state, n)
    return M.cat(outs, 0), state


class RNNBase(Module):
    """Base of RNN, LSTM and GRU: stacked, optionally bidirectional layers with PyTorch's parameter names."""
    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if proj_size:
            raise RumusError("LSTM(proj_size=...) is not supported yet; leave proj_size=0")
        if not 0 <= dropout <= 1:
            raise ValueError(f"dropout should be a number in range [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"hidden_size and num_layers must be positive, got {hidden_size}, {num_layers}")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, 0
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        self._weight_names: list[list[str]] = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"] + ([f"bias_ih{sfx}", f"bias_hh{sfx}"] if bias else [])
                shapes = [(gate, layer_in), (gate, hidden_size), (gate,), (gate,)]
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(_creation.empty(*shape, device=device, dtype=dtype)))
                self._weight_names.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self) -> None:
        """PyTorch compacts cuDNN weights here; RUMUS keeps no fused copy, so there is nothing to do."""

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, n) for n in names] for names in self._weight_names]

    def _zero_state(self, batch: int, like: Tensor) -> Tensor:
        dirs = 2 if self.bidirectional else 1
        return _creation.zeros(self.num_layers * dirs, batch, self.hidden_size, dtype=like.dtype, device=like.device)

    def _check_state(self, h: Tensor, batch: int, what: str) -> None:
        want = ((2 if self.bidirectional else 1) * self.num_layers, batch, self.hidden_size)
        if tuple(h.shape) != want:
            raise ShapeError(f"{type(self).__name__}: expected {what} of size {want}, got {tuple(h.shape)}")

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        packed = isinstance(input, PackedSequence)
        unbatched = False
        if packed:
            data, batch_sizes = input.data, [int(b) for b in input.batch_sizes.tolist()]
            batch = batch_sizes[0]
        else:
            if input.ndim not in (2, 3):
                raise ShapeError(f"{type(self).__name__}: expected input of 2 (unbatched) or 3 dimensions, got "
                                 f"shape {tuple(input.shape)}")
            unbatched = input.ndim == 2
            x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
            if x.shape[-1] != self.input_size:
                raise ShapeError(f"{type(self).__name__}: input.size(-1) must be equal to input_size. Expected "
                                 f"{self.input_size}, got {x.shape[-1]}")
            steps, batch = x.shape[0], x.shape[1]
            data, batch_sizes = x.reshape(steps * batch, x.shape[-1]), [batch] * steps
        states = self._initial_states(hx, batch, data, unbatched, input if packed else None)
        cell = _cell_for(self.mode)
        dirs = 2 if self.bidirectional else 1
        finals: list[State] = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                data = F.dropout(data, self.dropout, True)
            outs = []
            for d in range(dirs):
                w = self.all_weights[layer * dirs + d]
                xw = F.linear(data, w[0], w[2] if self.bias else None)
                out, final = _run_direction(cell, xw, batch_sizes, states[layer * dirs + d], w[1],
                                            w[3] if self.bias else None, reverse=d == 1)
                outs.append(out)
                finals.append(final)
            data = outs[0] if dirs == 1 else M.cat(outs, -1)
        return self._finish(input, data, finals, packed, unbatched, batch_sizes)

    def _initial_states(self, hx: Any, batch: int, like: Tensor, unbatched: bool,
                        packed: PackedSequence | None) -> list[State]:
        lstm = self.mode == "LSTM"
        if hx is None:
            z = self._zero_state(batch, like)
            hs: Any = (z, z) if lstm else z
        else:
            if lstm and not (isinstance(hx, tuple) and len(hx) == 2):
                raise RumusError("LSTM: hx must be a tuple (h_0, c_0)")
            hs = tuple(h.unsqueeze(1) for h in hx) if lstm and unbatched else (
                hx.unsqueeze(1) if unbatched else hx)
            if packed is not None and packed.sorted_indices is not None:  # states follow the sorted batch order
                hs = tuple(h.index_select(1, packed.sorted_indices) for h in hs) if lstm else \
                    hs.index_select(1, packed.sorted_indices)
            for h, what in (zip(hs, ("h_0", "c_0")) if lstm else [(hs, "hx")]):
                self._check_state(h, batch, what)
        n = self.num_layers * (2 if self.bidirectional else 1)
        return [(hs[0][i], hs[1][i]) if lstm else hs[i] for i in range(n)]

    def _finish(self, input: Any, data: Tensor, finals: list[State], packed: bool, unbatched: bool,
                batch_sizes: list[int]) -> tuple[Any, Any]:
        lstm = self.mode == "LSTM"
        h_n: Any = (M.stack([s[0] for s in finals], 0), M.stack([s[1] for s in finals], 0)) if lstm else \
            M.stack(finals, 0)
        if packed:
            if input.unsorted_indices is not None:
                h_n = tuple(h.index_select(1, input.unsorted_indices) for h in h_n) if lstm else \
                    h_n.index_select(1, input.unsorted_indices)
            return PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices), h_n
        out = data.reshape(len(batch_sizes), batch_sizes[0], data.shape[-1])
        if unbatched:
            return out.squeeze(1), (tuple(h.squeeze(1) for h in h_n) if lstm else h_n.squeeze(1))
        return (out.transpose(0, 1) if self.batch_first else out), h_n

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN (tanh or relu) over a sequence; returns (output, h_n), as torch.nn.RNN."""
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory over a sequence; returns (output, (h_n, c_n)), as torch.nn.LSTM."""
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit over a sequence; returns (output, h_n), as torch.nn.GRU."""
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


# ---- cells ---------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Base of the single-step cells RNNCell, LSTMCell and GRUCell."""
    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(_creation.empty(gates * hidden_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(_creation.empty(gates * hidden_size, hidden_size, device=device, dtype=dtype))
        self.bias_ih: Parameter | None
        self.bias_hh: Parameter | None
        if bias:
            self.bias_ih = Parameter(_creation.empty(gates * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(_creation.empty(gates * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _prepare(self, input: Tensor, hx: Any, n_states: int) -> tuple[Tensor, Any, bool]:
        if input.ndim not in (1, 2):
            raise ShapeError(f"{type(self).__name__}: expected input of 1 (unbatched) or 2 dimensions, got shape "
                             f"{tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{type(self).__name__}: input has {input.shape[-1]} features, expected "
                             f"{self.input_size}")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            z = _creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            hx = (z, z) if n_states == 2 else z
        elif unbatched:
            hx = tuple(h.unsqueeze(0) for h in hx) if n_states == 2 else hx.unsqueeze(0)
        return F.linear(x, self.weight_ih, self.bias_ih), hx, unbatched

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih.T + b_ih + h W_hh.T + b_hh)."""
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        xw, h, unbatched = self._prepare(input, hx, 1)
        out = rnn_step(xw, h, self.weight_hh, self.bias_hh, self.nonlinearity)
        return out.squeeze(0) if unbatched else out


class LSTMCell(RNNCellBase):
    """One step of an LSTM: returns (h', c')."""
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        xw, state, unbatched = self._prepare(input, hx, 2)
        h, c = _lstm_cell(xw, state, self.weight_hh, self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One step of a GRU: returns h'."""
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        xw, h, unbatched = self._prepare(input, hx, 1)
        out = _gru_cell(xw, h, self.weight_hh, self.bias_hh)
        return out.squeeze(0) if unbatched else out

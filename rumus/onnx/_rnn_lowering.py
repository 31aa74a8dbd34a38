"""nn.RNN / LSTM / GRU exported as ONNX's LSTM / GRU / RNN nodes, one per layer.

Traced op by op, a recurrent layer would be unrolled: one copy of the cell per time step, frozen at the
example's sequence length. So while exporting, each recurrent module's forward runs untraced (for its
values) and is recorded as ONNX's recurrent ops, whose time loop follows the input's length at run time.
PyTorch's gate blocks are re-ordered into ONNX's (LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h), and GRU is
`linear_before_reset=1`, PyTorch's formula. The weights become initializers named after the module's
state-dict keys (`lstm.onnx_W_l0`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from rumus_contracts.onnx_lowering import OnnxExportError, OnnxNode

from ..nn.module import Module
from ..nn.rnn import RNNBase
from ..nn.utils.rnn import PackedSequence
from ..tensor import Tensor
from ._trace import Tracer, _host

# mode -> (ONNX op, PyTorch gate blocks in ONNX's order)
_ONNX = {"LSTM": ("LSTM", (0, 3, 1, 2)), "GRU": ("GRU", (1, 0, 2)),
         "RNN_TANH": ("RNN", (0,)), "RNN_RELU": ("RNN", (0,))}


def _reorder(w: np.ndarray, mode: str) -> np.ndarray:
    _, order = _ONNX[mode]
    blocks = np.split(w, len(order), axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


class _RecurrentLowering:
    def __init__(self, tracer: Tracer, module: RNNBase, prefix: str) -> None:
        self.t, self.m, self.prefix = tracer, module, prefix

    def node(self, op: str, ins: list[str], hint: str, n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.t.fresh(f"{hint}_{i}" if n_out > 1 else hint) for i in range(n_out)]
        self.t.nodes.append(OnnxNode(op, ins, outs, attrs))
        return outs

    def weight(self, name: str, arrays: list[np.ndarray], like: Tensor) -> str:
        key = self.t.fresh(f"{self.prefix}onnx_{name}")
        self.t.initializers[key] = (np.stack(arrays, 0), like.dtype)
        return key

    def slice0(self, src: str, start: int, stop: int) -> str:
        c = self.t.const
        return self.node("Slice", [src, c([start], "int64"), c([stop], "int64"), c([0], "int64")], "state")[0]

    def lower(self, x: str, hx: Any, dirs_hint: int) -> tuple[str, list[str], list[str]]:
        """x: [seq, batch, input] -> (y [seq, batch, dirs*hidden], h_n parts, c_n parts per layer)."""
        m = self.m
        op, _ = _ONNX[m.mode]
        dirs, hsz = dirs_hint, m.hidden_size
        h_parts: list[str] = []
        c_parts: list[str] = []
        h0 = self.t.name_of(hx[0] if m.mode == "LSTM" else hx) if hx is not None else ""
        c0 = self.t.name_of(hx[1]) if hx is not None and m.mode == "LSTM" else ""
        for layer in range(m.num_layers):
            ws = m.all_weights[layer * dirs:(layer + 1) * dirs]
            w = self.weight(f"W_l{layer}", [_reorder(_host(p[0]), m.mode) for p in ws], ws[0][0])
            r = self.weight(f"R_l{layer}", [_reorder(_host(p[1]), m.mode) for p in ws], ws[0][1])
            b = self.weight(f"B_l{layer}", [np.concatenate([_reorder(_host(p[i]), m.mode) for i in (2, 3)])
                                            for p in ws], ws[0][2]) if m.bias else ""
            ins = [x, w, r, b, "", self.slice0(h0, layer * dirs, (layer + 1) * dirs) if h0 else ""]
            if m.mode == "LSTM":
                ins.append(self.slice0(c0, layer * dirs, (layer + 1) * dirs) if c0 else "")
            attrs: dict[str, Any] = {"hidden_size": hsz, "direction": "bidirectional" if dirs == 2 else "forward"}
            if m.mode == "GRU":
                attrs["linear_before_reset"] = 1
            if op == "RNN":
                attrs["activations"] = ["Relu" if m.mode == "RNN_RELU" else "Tanh"] * dirs
            outs = self.node(op, _trim(ins), f"{op.lower()}_l{layer}", 3 if m.mode == "LSTM" else 2, **attrs)
            h_parts.append(outs[1])
            if m.mode == "LSTM":
                c_parts.append(outs[2])
            # Y [seq, dirs, batch, hidden] -> [seq, batch, dirs * hidden], the next layer's input
            y = self.node("Transpose", [outs[0]], f"{op.lower()}_y_t", perm=[0, 2, 1, 3])[0]
            x = self.node("Reshape", [y, self.t.const([0, 0, -1], "int64")], f"{op.lower()}_y")[0]
        return x, h_parts, c_parts


def _trim(ins: list[str]) -> list[str]:
    while ins and not ins[-1]:
        ins.pop()
    return ins


def _traced_forward(tracer: Tracer, module: RNNBase, prefix: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def forward(input: Any, hx: Any = None) -> Any:
        if not tracer.here():
            return original(input, hx)
        if isinstance(input, PackedSequence):
            raise OnnxExportError(f"{type(module).__name__} '{prefix.rstrip('.')}' got a PackedSequence; packed "
                                  f"sequences cannot be exported to ONNX, pass padded input")
        with tracer.paused():
            out, h_n = original(input, hx)
        low = _RecurrentLowering(tracer, module, prefix)
        c = tracer.const
        x = tracer.name_of(input)
        if input.ndim == 2:
            x = low.node("Unsqueeze", [x, c([1], "int64")], "x_batched")[0]
        elif module.batch_first:
            x = low.node("Transpose", [x], "x_time_major", perm=[1, 0, 2])[0]
        state = hx
        if hx is not None and input.ndim == 2:  # unbatched states [layers*dirs, hidden]: add the batch dim
            state = tuple(h.unsqueeze(1) for h in hx) if module.mode == "LSTM" else hx.unsqueeze(1)
        y, h_parts, c_parts = low.lower(x, state, 2 if module.bidirectional else 1)
        if input.ndim == 2:
            y = low.node("Squeeze", [y, c([1], "int64")], "y_unbatched")[0]
        elif module.batch_first:
            y = low.node("Transpose", [y], "y_batch_major", perm=[1, 0, 2])[0]
        tracer.bind(out, y)
        finals = [(h_parts, h_n[0] if module.mode == "LSTM" else h_n)]
        if module.mode == "LSTM":
            finals.append((c_parts, h_n[1]))
        for parts, tensor in finals:
            joined = parts[0] if len(parts) == 1 else low.node("Concat", parts, "h_n", axis=0)[0]
            if input.ndim == 2:
                joined = low.node("Squeeze", [joined, c([1], "int64")], "h_n_unbatched")[0]
            tracer.bind(tensor, joined)
        return out, h_n
    return forward


@contextmanager
def recurrent_modules_lowered(model: Module, tracer: Tracer) -> Iterator[None]:
    """While exporting, every nn.RNN/LSTM/GRU in `model` records ONNX recurrent nodes instead of its unrolled ops."""
    patched: list[RNNBase] = []
    try:
        for name, m in model.named_modules():
            if isinstance(m, RNNBase):
                object.__setattr__(m, "forward", _traced_forward(tracer, m, f"{name}." if name else "", m.forward))
                patched.append(m)
        yield
    finally:
        for m in patched:
            del m.__dict__["forward"]

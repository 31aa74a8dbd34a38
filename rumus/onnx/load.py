"""`rumus.onnx.load`: an ONNX file as an nn.Module that interprets its graph with rumus ops (so it runs on
any backend and can be fine-tuned: float initializers become Parameters, named by their initializer
names, nested into submodules along dots so `state_dict()` keys match the exporter's)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rumus_contracts import FormatError, RumusError

from .. import _creation
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..tensor import Tensor
from . import _build
from ._interpret import OPS
from ._interpret_host import DEVICE, HOST_OPS, OUTPUTS, Value

_COUNTS_OUTPUTS = {"Split", "LayerNormalization"}  # ops whose work depends on how many outputs are asked for
_IDENT = re.compile(r"^[A-Za-z0-9_]+$")


def _read(path: str) -> Any:
    onnx = _build._onnx()
    try:
        model = onnx.load(path)
    except FileNotFoundError:
        raise FormatError(f"{path}: no such ONNX file") from None
    except Exception as exc:  # protobuf's DecodeError, truncated external data, ...
        raise FormatError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx's ValidationError, sometimes with an empty message
        lines = str(exc).strip().splitlines()
        why = lines[0][:300] if lines else f"{type(exc).__name__} with no message"
        raise FormatError(f"{path}: the ONNX model is invalid: {why}") from None
    if not model.graph.node and not model.graph.output:
        raise FormatError(f"{path}: the ONNX model has an empty graph")
    return model


def _array(t: Any) -> np.ndarray:
    from onnx import numpy_helper
    try:
        arr = numpy_helper.to_array(t)
    except Exception as exc:
        raise FormatError(f"initializer '{t.name}' cannot be read: {exc}") from None
    return np.asarray(arr)


class _Holder(Module):
    """A submodule holding the parameters under one dotted prefix."""


class OnnxModule(Module):
    """An ONNX graph run by rumus: forward(*inputs) -> output or tuple of outputs."""

    def __init__(self, model: Any, path: str = "<memory>", device: Any = None) -> None:
        super().__init__()
        object.__setattr__(self, "_device", device)
        graph = model.graph
        opsets = {o.domain: o.version for o in model.opset_import}
        object.__setattr__(self, "opset", opsets.get("", opsets.get("ai.onnx", 0)))
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_nodes", list(graph.node))
        object.__setattr__(self, "_consts", {})
        object.__setattr__(self, "_param_names", {})
        init_names = {t.name for t in graph.initializer}
        object.__setattr__(self, "input_names", [i.name for i in graph.input if i.name not in init_names])
        object.__setattr__(self, "output_names", [o.name for o in graph.output])
        for n in self._nodes:
            if n.domain not in ("", "ai.onnx"):
                raise RumusError(f"ONNX node '{n.name}' ({n.op_type}) is in domain '{n.domain}', which rumus does not "
                                 f"implement")
            if n.op_type not in OPS and n.op_type not in HOST_OPS:
                raise RumusError(f"ONNX node '{n.name or '?'}' has op type '{n.op_type}', which rumus.onnx.load does "
                                 f"not implement")
        for i, t in enumerate(graph.initializer):
            arr = _array(t)
            if arr.dtype.kind == "f" and arr.ndim > 0:
                self._add_parameter(t.name, arr, i)
            else:
                self._consts[t.name] = arr

    def _add_parameter(self, name: str, arr: np.ndarray, i: int) -> None:
        parts = name.split(".")
        if not all(_IDENT.match(p) for p in parts):
            parts = [f"param_{i}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)]
        owner: Module = self
        for p in parts[:-1]:
            sub = owner._modules.get(p)
            if sub is None:
                sub = _Holder()
                owner.add_module(p, sub)
            owner = sub
        if parts[-1] in owner._parameters or parts[-1] in owner._modules:
            parts[-1] = f"{parts[-1]}_{i}"
        dtype = "float16" if arr.dtype == np.float16 else "float64" if arr.dtype == np.float64 else "float32"
        owner.register_parameter(parts[-1], Parameter(_creation.tensor(arr, dtype=dtype, device=self._device)))
        self._param_names[name] = (owner, parts[-1])

    def forward(self, *inputs: Any) -> Any:
        token = DEVICE.set(self._device)
        try:
            return self._run(inputs)
        finally:
            DEVICE.reset(token)

    def _run(self, inputs: Sequence[Any]) -> Any:
        if len(inputs) != len(self.input_names):
            raise RumusError(f"the ONNX model takes {len(self.input_names)} inputs {self.input_names}, got "
                             f"{len(inputs)}")
        env: dict[str, Value] = dict(self._consts)
        for name, (owner, attr) in self._param_names.items():
            env[name] = owner._parameters[attr]
        for name, x in zip(self.input_names, inputs):
            env[name] = x if isinstance(x, Tensor) else _creation.tensor(np.asarray(x), device=self._device)
        env[""] = None
        for node in self._nodes:
            args = [env[i] if i in env else _missing(node, i) for i in node.input]
            attrs = {a.name: _attr(a) for a in node.attribute}
            wanted = [n for n in node.output if n]
            if node.op_type in _COUNTS_OUTPUTS:
                attrs[OUTPUTS] = len(node.output)
            host = node.op_type == "Shape" or node.op_type in HOST_OPS and all(
                a is None or isinstance(a, np.ndarray) for a in args)
            fn = HOST_OPS[node.op_type] if host else OPS.get(node.op_type)
            if fn is None:
                raise RumusError(f"ONNX node '{node.name}' ({node.op_type}) needs host inputs")
            try:
                outs = fn(args, attrs, self.opset)
            except RumusError as exc:
                exc.args = (f"ONNX node '{node.name}' ({node.op_type}): {exc}",)  # the same error, placed
                raise exc.with_traceback(None) from None
            except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as exc:  # a malformed node
                raise FormatError(f"ONNX node '{node.name}' ({node.op_type}) cannot run: {type(exc).__name__}: "
                                  f"{exc}") from None
            results = outs if isinstance(outs, (tuple, list)) else (outs,)
            missing = [n for i, n in enumerate(node.output) if n and i >= len(results)]
            if missing:
                raise RumusError(f"ONNX node '{node.name}' ({node.op_type}): its output(s) {missing} are not "
                                 f"supported (rumus computes the first {len(results)} of {len(wanted)})")
            for name, v in zip(node.output, results):
                env[name] = np.asarray(v) if isinstance(v, np.generic) else v  # numpy's 0-d results are scalars
        results = [_as_tensor(env[n]) for n in self.output_names]
        return results[0] if len(results) == 1 else tuple(results)


def _missing(node: Any, name: str) -> Value:
    raise FormatError(f"ONNX node '{node.name}' ({node.op_type}) reads '{name}', which no node or input defines")


def _as_tensor(v: Value) -> Tensor:
    return v if isinstance(v, Tensor) else _creation.tensor(np.asarray(v), device=DEVICE.get())


def _attr(a: Any) -> Any:
    from onnx import helper, numpy_helper
    v = helper.get_attribute_value(a)
    if a.type == a.TENSOR:
        return numpy_helper.to_array(v)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, Sequence) and not isinstance(v, str):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def load(path: str, device: Any = None) -> OnnxModule:
    """Read and check an ONNX file (FormatError if it is malformed or truncated); its parameters are made on
    `device` (default: the default device, RUMUS_BACKEND)."""
    return OnnxModule(_read(path), path, device)

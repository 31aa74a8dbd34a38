"""`rumus.onnx.export`: run the model once with tracing hooks on, lower what ran, check and write."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts.onnx_lowering import OnnxExportError

import rumus

from .. import _dispatch, _math, _views
from ..autograd import no_grad
from ..nn.module import Module
from ..tensor import Tensor
from . import _build
from ._trace import Tracer

MIN_OPSET = 17


def default_opset() -> int:
    """The newest opset the installed onnx defines (onnxruntime 1.32 runs up to 28, the newest of onnx 1.23;
    the test suite runs every export through onnxruntime at this default)."""
    return int(_build._onnx().defs.onnx_opset_version())
_lock = threading.Lock()  # the hooks are process-wide: one export at a time


def _dynamic(spec: Mapping[str, Any] | None, name: str) -> dict[int, str]:
    axes = (spec or {}).get(name)
    if axes is None:
        return {}
    if isinstance(axes, Mapping):
        return {int(a): str(s) for a, s in axes.items()}
    return {int(a): f"{name}_dim{a}" for a in axes}


def _named_tensors(model: Module) -> dict[int, tuple[str, Tensor]]:
    named: dict[int, tuple[str, Tensor]] = {}
    for key, t in model.state_dict().items():
        named.setdefault(id(t), (key, t))  # a tied weight keeps its first key
    for key, p in model.named_parameters():  # state_dict may hold detached copies: map the real objects too
        named.setdefault(id(p), (key, p))
    for key, b in model.named_buffers():
        named.setdefault(id(b), (key, b))
    return named


def _traced_cat(cat: Any, tracer: Tracer) -> Any:
    def traced(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        tensors = list(tensors)
        out: Tensor = cat(tensors, dim)
        if tracer.here():  # another thread's cat is not part of the export
            tracer.on_cat(tensors, dim, out)
        return out
    return traced


def export(model: Module, args: Tensor | Sequence[Any], path: str, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, dynamic_axes: Mapping[str, Any] | None = None,
           opset_version: int | None = None, external_data: bool | None = None) -> Any:
    """Trace `model(*args)` and write it to `path` as ONNX; returns the checked ModelProto.

    dynamic_axes: {input name: {axis: "symbol"} or [axes]}; initializers carry state-dict keys. opset_version
    defaults to the newest the installed onnx package defines (`default_opset()`).
    The model is traced in eval mode (restored afterwards). external_data: None writes the weights to
    `path + ".data"` only when the model exceeds protobuf's 2 GB limit; True/False force it.
    """
    if opset_version is None:
        opset_version = default_opset()
    if opset_version < MIN_OPSET:
        raise OnnxExportError(f"opset_version {opset_version} is too old; use {MIN_OPSET} or newer")
    call_args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    tensors = [a for a in call_args if isinstance(a, Tensor)]
    names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(tensors))]
    if len(names) != len(tensors):
        raise OnnxExportError(f"input_names has {len(names)} names for {len(tensors)} tensor inputs")
    named = _named_tensors(model)
    tracer = Tracer(opset_version, named)
    for t, name in zip(tensors, names):
        tracer.add_input(t, name, _dynamic(dynamic_axes, name))
    tracer.check_sizes({key: t.shape for key, t in named.values()})
    was_training = model.training
    with _lock:
        model.eval()
        _dispatch._tracer, _views._tracer = tracer, tracer.on_view
        original_cat = _math.cat
        # cat writes through copy_into, not an op: trace it as Concat (names bound to it are patched too)
        patched = [(mod, attr) for mod in (_math, rumus) for attr in ("cat", "concat")
                   if getattr(mod, attr, None) is original_cat]
        for mod, attr in patched:
            setattr(mod, attr, _traced_cat(original_cat, tracer))
        try:
            with no_grad():
                result = model(*call_args)
        finally:
            _dispatch._tracer, _views._tracer = None, None
            for mod, attr in patched:
                setattr(mod, attr, original_cat)
            model.train(was_training)
    tracer.check_versions()
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(o, Tensor) for o in outs):
        raise OnnxExportError("the model must return a Tensor or a tuple/list of Tensors to be exported")
    out_names = list(output_names) if output_names is not None else [f"output_{i}" for i in range(len(outs))]
    if len(out_names) != len(outs):
        raise OnnxExportError(f"output_names has {len(out_names)} names for {len(outs)} outputs")
    from rumus_contracts.onnx_lowering import OnnxNode
    for o, name in zip(outs, out_names):
        tracer.nodes.append(OnnxNode("Identity", [tracer.output_name(o)], [name]))
    sym = {size: s for size, (_, _, s) in tracer.symbols.items()}
    in_infos = [_build.value_info(n, t.dtype, [sym.get(d, d) if a in _dynamic(dynamic_axes, n) else d
                                               for a, d in enumerate(t.shape)]) for t, n in zip(tensors, names)]
    out_infos = [_build.value_info(n, o.dtype, [sym.get(d, d) for d in o.shape]) for o, n in zip(outs, out_names)]
    used = {i for node in tracer.nodes for i in node.inputs}
    inits = {k: v for k, v in tracer.initializers.items() if k in used}
    model_proto = _build.build_model(tracer.nodes, in_infos, out_infos, inits, opset_version,
                                     type(model).__name__)
    if external_data is None:
        external_data = _build.initializer_bytes(inits) > _build.PROTOBUF_LIMIT - 2**24
    return _build.check_and_save(model_proto, path, external_data)

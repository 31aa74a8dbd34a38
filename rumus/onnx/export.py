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
from ._rnn_lowering import recurrent_modules_lowered
from ._sym_patches import symbolic_sizes
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
    an external data file beside `path` (named `<path>.<pid>-<random>.data`, unique to this export so that
    the old model keeps loading until the new one replaces it) only when the model exceeds protobuf's 2 GB
    limit; True/False force it.
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
    model_proto, inits = _trace_to_proto(model, call_args, names, output_names, dynamic_axes, opset_version)
    if any(_dynamic(dynamic_axes, n) for n in names):
        model_proto = _check_same_graph(model, call_args, names, output_names, dynamic_axes, opset_version,
                                        model_proto)
    if external_data is None:
        external_data = _build.initializer_bytes(inits) > _build.PROTOBUF_LIMIT - 2**24
    return _build.check_and_save(model_proto, path, external_data)


def _trace_to_proto(model: Module, call_args: tuple[Any, ...], names: list[str], output_names: Sequence[str] | None,
                    dynamic_axes: Mapping[str, Any] | None, opset_version: int) -> tuple[Any, dict[str, Any]]:
    """Run the model once with the tracing hooks on; the unchecked ModelProto and its used initializers."""
    tensors = [a for a in call_args if isinstance(a, Tensor)]
    named = _named_tensors(model)
    tracer = Tracer(opset_version, named)
    for name in output_names or ():  # traced values never take an output's name
        tracer.fresh(name)
    was_training = model.training
    with _lock:
        try:  # dynamic axes put SymInts into the inputs' shapes until the trace is over
            for t, name in zip(tensors, names):
                tracer.add_input(t, name, _dynamic(dynamic_axes, name))
            tracer.check_sizes({key: t.shape for key, t in named.values()})
            result = _run_traced(model, call_args, tracer)
        finally:
            tracer.restore_inputs()
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
    out_infos = [_build.value_info(n, o.dtype, [_out_dim(tracer, sym, d, n, a) for a, d in enumerate(o.shape)])
                 for o, n in zip(outs, out_names)]
    used = {i for node in tracer.nodes for i in node.inputs}
    inits = {k: v for k, v in tracer.initializers.items() if k in used}
    return _build.build_model(tracer.nodes, in_infos, out_infos, inits, opset_version, type(model).__name__), inits


def _run_traced(model: Module, call_args: tuple[Any, ...], tracer: Tracer) -> Any:
    model.eval()
    _dispatch._tracer, _views._tracer = tracer, tracer.on_view
    original_cat = _math.cat
    # cat writes through copy_into, not an op: trace it as Concat (names bound to it are patched too)
    patched = [(mod, attr) for mod in (_math, rumus) for attr in ("cat", "concat")
               if getattr(mod, attr, None) is original_cat]
    for mod, attr in patched:
        setattr(mod, attr, _traced_cat(original_cat, tracer))
    try:
        with no_grad(), recurrent_modules_lowered(model, tracer), symbolic_sizes(tracer):
            return model(*call_args)
    finally:
        _dispatch._tracer, _views._tracer = None, None
        for mod, attr in patched:
            setattr(mod, attr, original_cat)


def _out_dim(tracer: Tracer, sym: Mapping[int, str], d: int, name: str, axis: int) -> int | str:
    """An output dim: a dynamic axis's symbol, a symbol of its own when it is computed from one, or a number."""
    if d in sym:
        return sym[d]
    return f"{name}_dim{axis}" if tracer.is_sym(d) else int(d)


def _grown(t: Tensor, axes: Sequence[int], by: int) -> Tensor:
    """t with each of `axes` longer by `by` (its first entries repeated): a valid input of another size."""
    for axis in axes:
        t = _math.cat([t] + [t.narrow(axis, 0, 1)] * by, axis)
    return t


def _check_same_graph(model: Module, call_args: tuple[Any, ...], names: list[str], output_names: Sequence[str] | None,
                      dynamic_axes: Mapping[str, Any] | None, opset_version: int, first: Any) -> Any:
    """Trace again with every dynamic axis longer: the graph must not change. Dynamic dims are recognized by
    size, so a Python loop over a dynamic dim, or a constant that merely equals a dynamic size, would otherwise
    be frozen into the file (a silently wrong model at other sizes); this check turns that into an error.
    Returns the ModelProto to write."""
    tensors = [a for a in call_args if isinstance(a, Tensor)]
    errors: list[str] = []
    diffs: list[tuple[int, str]] = []
    static = {d for t, n in zip(tensors, names) for a, d in enumerate(t.shape) if a not in _dynamic(dynamic_axes, n)}
    sizes = {t.shape[a] for t, n in zip(tensors, names) for a in _dynamic(dynamic_axes, n)}
    for by in range(1, 8):
        if any(size + by in static for size in sizes):  # the re-trace itself would be ambiguous
            continue
        grown = iter([_grown(t, sorted(_dynamic(dynamic_axes, n)), by) for t, n in zip(tensors, names)])
        args2 = tuple(next(grown) if isinstance(a, Tensor) else a for a in call_args)
        try:
            second, _ = _trace_to_proto(model, args2, names, output_names, dynamic_axes, opset_version)
        except OnnxExportError as exc:  # e.g. the grown size collides with a weight's dim: try another
            errors.append(str(exc))
            continue
        diff = _first_difference(first.graph, second.graph)
        if diff is not None:
            # the first trace may have made what later calls take from a cache (a scalar's fill op becomes a
            # cached constant): trace the example again, now warm, and compare that
            first, _ = _trace_to_proto(model, call_args, names, output_names, dynamic_axes, opset_version)
            diff = _first_difference(first.graph, second.graph)
        if diff is None:
            return first
        # a size that merely equals a static dim (a batch of 4 with 4 heads) reads that dim from the graph
        # (right, but another graph): an identical graph at any other size shows nothing was frozen
        diffs.append((by, diff))
        if len(diffs) == 3:
            break
    if diffs:
        axes = ", ".join(f"{n} dim {a} ('{s}')" for n in names for a, s in _dynamic(dynamic_axes, n).items())
        by, diff = diffs[0]
        raise OnnxExportError(f"the traced graph depends on the size of the dynamic axes ({axes}): traced again with "
                              f"them {by} longer, {diff}. A Python loop over a dynamic dim, or a constant built from "
                              f"its size, would be frozen at the example size; export without that dynamic axis, "
                              f"or build the value from the inputs with ops (if the example size of an axis equals "
                              f"a fixed size of the model, such as its head count, pick another example size)")
    raise OnnxExportError("could not re-trace the model at other sizes of its dynamic axes to check the graph: "
                          + "; ".join(errors))


def _first_difference(a: Any, b: Any) -> str | None:
    if len(a.node) != len(b.node):
        return f"it has {len(b.node)} nodes instead of {len(a.node)}"
    for i, (x, y) in enumerate(zip(a.node, b.node)):
        if x.SerializeToString() != y.SerializeToString():
            return f"node {i} ({x.op_type}) differs ({y.op_type})"
    inits = {t.name: t.SerializeToString() for t in a.initializer}
    for t in b.initializer:
        if inits.get(t.name) != t.SerializeToString():
            return f"initializer '{t.name}' differs"
    if len(inits) != len(b.initializer):
        return "its initializers differ"
    return None

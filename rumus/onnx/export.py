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
    first = _trace_to_proto(model, call_args, names, output_names, dynamic_axes, opset_version)
    model_proto, inits = first.proto, first.inits
    if any(_dynamic(dynamic_axes, n) for n in names):
        model_proto = _check_same_graph(model, call_args, names, output_names, dynamic_axes, opset_version, first)
    if external_data is None:
        external_data = _build.initializer_bytes(inits) > _build.PROTOBUF_LIMIT - 2**24
    return _build.check_and_save(model_proto, path, external_data)


class _Traced:
    """One trace: the unchecked ModelProto, its used initializers, each node's source line in the user's code
    and the dynamic sizes the user's code turned into plain Python numbers."""

    def __init__(self, proto: Any, inits: dict[str, Any], sources: list[str], frozen: list[tuple[str, str, str]]):
        self.proto, self.inits, self.sources, self.frozen = proto, inits, sources, frozen


def _trace_to_proto(model: Module, call_args: tuple[Any, ...], names: list[str], output_names: Sequence[str] | None,
                    dynamic_axes: Mapping[str, Any] | None, opset_version: int) -> _Traced:
    """Run the model once with the tracing hooks on."""
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
    proto = _build.build_model(tracer.nodes, in_infos, out_infos, inits, opset_version, type(model).__name__)
    return _Traced(proto, inits, list(getattr(tracer.nodes, "sources", [])), tracer.frozen)


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
                      dynamic_axes: Mapping[str, Any] | None, opset_version: int, first: _Traced) -> Any:
    """Trace again with every dynamic axis longer: the graph must not change. Dynamic dims are recognized by
    size, so a Python loop over a dynamic dim, or a constant that merely equals a dynamic size, would otherwise
    be frozen into the file (a silently wrong model at other sizes); this check turns that into an error that
    names the axis and the line of the model's code. Returns the ModelProto to write."""
    errors: list[str] = []
    diffs: list[tuple[int, str, _Traced]] = []
    for by in range(1, 8):
        args2 = _grown_args(call_args, names, dynamic_axes, by, None)
        if args2 is None:  # the re-trace itself would be ambiguous
            continue
        try:
            second = _trace_to_proto(model, args2, names, output_names, dynamic_axes, opset_version)
        except OnnxExportError as exc:  # e.g. the grown size collides with a weight's dim: try another
            errors.append(str(exc))
            continue
        diff = _first_difference(first, second)
        if diff is not None:
            # the first trace may have made what later calls take from a cache (a scalar's fill op becomes a
            # cached constant): trace the example again, now warm, and compare that
            first = _trace_to_proto(model, call_args, names, output_names, dynamic_axes, opset_version)
            diff = _first_difference(first, second)
        if diff is None:
            return first.proto
        # a size that merely equals a static dim (a batch of 4 with 4 heads) reads that dim from the graph
        # (right, but another graph): an identical graph at any other size shows nothing was frozen
        diffs.append((by, diff, second))
        if len(diffs) == 3:
            break
    if diffs:
        by, diff, second = diffs[0]
        axes = _axes_that_change(model, call_args, names, output_names, dynamic_axes, opset_version, first, by)
        frozen = list(dict.fromkeys(f"{origin} became a plain number by {how} at {where}"
                                    for origin, how, where in first.frozen + second.frozen))
        why = ("; ".join(frozen[:3]) if frozen else
               "the model's code there runs differently at another size (a Python loop over range() of a size, "
               "a list of that length, or a number computed from it)")
        raise OnnxExportError(f"the traced graph depends on the size of the dynamic axis {axes}: traced again with it "
                              f"{by} longer, {diff}. Where: {why}. That size would be frozen at the example's value "
                              f"in the file; compute it with tensor ops instead (sizes read from x.shape, arithmetic "
                              f"on them, rm.arange, view/reshape/expand to them stay dynamic), or export that axis "
                              f"as static (leave it out of dynamic_axes). If the example size of an axis equals a "
                              f"fixed size of the model, such as its head count, pick another example size")
    raise OnnxExportError("could not re-trace the model at other sizes of its dynamic axes to check the graph: "
                          + "; ".join(errors))


def _symbols(names: list[str], dynamic_axes: Mapping[str, Any] | None) -> dict[str, list[tuple[str, int]]]:
    """symbol -> the (input, axis) pairs that carry it."""
    out: dict[str, list[tuple[str, int]]] = {}
    for n in names:
        for a, sym in _dynamic(dynamic_axes, n).items():
            out.setdefault(sym, []).append((n, a))
    return out


def _grown_args(call_args: tuple[Any, ...], names: list[str], dynamic_axes: Mapping[str, Any] | None, by: int,
                only: str | None) -> tuple[Any, ...] | None:
    """The call's arguments with every dynamic axis (or those of symbol `only`) longer by `by`; None when a grown
    size would equal a static dim (then the re-trace could not tell them apart)."""
    tensors = [a for a in call_args if isinstance(a, Tensor)]
    static = {d for t, n in zip(tensors, names) for a, d in enumerate(t.shape) if a not in _dynamic(dynamic_axes, n)}
    grow = {n: sorted(a for a, sym in _dynamic(dynamic_axes, n).items() if only is None or sym == only)
            for n in names}
    sizes = {t.shape[a] for t, n in zip(tensors, names) for a in grow[n]}
    if any(size + by in static for size in sizes):
        return None
    grown = iter([_grown(t, grow[n], by) for t, n in zip(tensors, names)])
    return tuple(next(grown) if isinstance(a, Tensor) else a for a in call_args)


def _axes_that_change(model: Module, call_args: tuple[Any, ...], names: list[str], output_names: Sequence[str] | None,
                      dynamic_axes: Mapping[str, Any] | None, opset_version: int, first: _Traced, by: int) -> str:
    """The dynamic axes whose growth alone changes the graph, as text ('seq' (ids dim 1), ...)."""
    symbols = _symbols(names, dynamic_axes)

    def text(sym: str) -> str:
        return f"'{sym}' (" + ", ".join(f"{n} dim {a}" for n, a in symbols[sym]) + ")"
    if len(symbols) > 1:
        changing = []
        for sym in symbols:
            args = _grown_args(call_args, names, dynamic_axes, by, sym)
            try:
                alone = None if args is None else _trace_to_proto(model, args, names, output_names, dynamic_axes,
                                                                  opset_version)
            except OnnxExportError:
                alone = None
            if alone is not None and _first_difference(first, alone) is not None:
                changing.append(sym)
        if changing:
            return " and ".join(text(s) for s in changing)
    return " / ".join(text(s) for s in symbols)


def _first_difference(first: _Traced, second: _Traced) -> str | None:
    """What differs between two traces, with the source line of the first node that does."""
    a, b = first.proto.graph, second.proto.graph
    for i, (x, y) in enumerate(zip(a.node, b.node)):
        if x.SerializeToString() != y.SerializeToString():
            return f"node {i} ({y.op_type}, made at {_source(second, i)}) differs"
    if len(a.node) != len(b.node):
        i = min(len(a.node), len(b.node))
        more = second if len(b.node) > len(a.node) else first
        return f"it has {len(b.node)} nodes instead of {len(a.node)} (the first extra one made at {_source(more, i)})"
    inits = {t.name: t.SerializeToString() for t in a.initializer}
    for t in b.initializer:
        if inits.get(t.name) != t.SerializeToString():
            user = next((k for k, n in enumerate(b.node) if t.name in n.input), None)
            where = "" if user is None else \
                f", used by node {user} ({b.node[user].op_type}, made at {_source(second, user)})"
            return f"initializer '{t.name}' differs{where}"
    if len(inits) != len(b.initializer):
        return "its initializers differ"
    return None


def _source(trace: _Traced, i: int) -> str:
    return trace.sources[i] if i < len(trace.sources) else "the graph's outputs"

"""Tracing a model into ONNX node descriptions: every dispatched op goes through its schema's lowering,
every view through `_view_lowering`, and every tensor the trace did not produce becomes an initializer
(named by its state-dict key when it is a parameter or buffer of the model).

Dynamic axes are recognized by value: an example input's dynamic dim of size n makes every shape that
the trace meets with a dim of size n (reshape targets, fill shapes, slice ends) follow that axis at run
time. `Tracer.check_sizes` refuses example sizes that would make this ambiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from rumus_contracts import DType, OpSchema
from rumus_contracts.onnx_lowering import OnnxExportError, OnnxNode

from ..tensor import Tensor
from ._source import user_line
from ._symint import SymInt, input_dim, output_dim
from ._views_lowering import lower_view

INT64_MAX = 2**63 - 1


class _Ctx:
    """The LoweringContext of one op call."""

    def __init__(self, tracer: Tracer, op: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._tracer = tracer
        self.op = op
        self.opset = tracer.opset
        self.input_shapes = [t.shape for t in inputs]
        self.output_shapes = [t.shape for t in outputs]
        self.input_dtypes = [t.dtype for t in inputs]
        self.output_dtypes = [t.dtype for t in outputs]

    def const(self, value: Any, dtype: DType | str) -> str:
        return self._tracer.const(value, dtype)

    def fresh(self, hint: str) -> str:
        return self._tracer.fresh(hint)

    def shape_tensor(self, shape: Sequence[int]) -> str:
        return self._tracer.shape_tensor(shape)


class Tracer:
    def __init__(self, opset: int, named: Mapping[int, tuple[str, Tensor]]) -> None:
        # The hooks are module globals seen by every thread: only the exporting thread's ops are recorded,
        # so a model training in another thread meanwhile neither lands in the graph nor is disturbed.
        self.thread = threading.get_ident()
        self.opset = opset
        self.nodes: list[OnnxNode] = _Nodes()
        self.frozen: list[tuple[str, str, str]] = []  # (dynamic size, how, user source line): sizes made plain
        self.initializers: dict[str, tuple[np.ndarray, DType]] = {}
        self._named = named  # id(parameter or buffer) -> (state-dict key, tensor)
        self._names: dict[int, str] = {}  # id(tensor) -> value name
        self._keep: list[Tensor] = []  # traced tensors stay alive, so their ids stay unique
        self._versions: list[tuple[Tensor, int]] = []
        self._storages: dict[int, list[Tensor]] = {}  # id(storage) -> the traced tensors on it
        self._used: set[str] = set()
        self._consts: dict[tuple[bytes, str, tuple[int, ...]], str] = {}
        self.symbols: dict[int, tuple[str, int, str]] = {}  # dim size -> (input name, axis, symbol)
        self._dims: dict[int, str] = {}  # dim size -> 1-D int64 value holding it at run time
        self._paused = False  # a module lowered as a whole runs its own ops untraced
        self.sym_names: dict[int, str] = {}  # id(SymInt) -> the value holding it at run time
        self._sym_keep: list[SymInt] = []
        self._input_shapes: list[tuple[Tensor, tuple[int, ...]]] = []  # inputs whose shapes hold SymInts

    # ---- names ----------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = hint.replace("/", "_") or "v"
        name, i = base, 0
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def bind(self, t: Tensor, name: str) -> None:
        self._names[id(t)] = name
        self._keep.append(t)
        self._versions.append((t, t._storage.version))
        self._storages.setdefault(id(t._storage), []).append(t)

    def bind_traced(self, t: Tensor, name: str) -> None:
        """Bind a value the trace computed. A dim of it that has the size of a dynamic axis but lost its SymInt
        on the way (a view's shape rebuilt from plain numbers) becomes `Shape(value)[axis]`: the value's own
        length at run time, which is right whether or not that dim really follows the axis."""
        self.bind(t, name)
        if any(not self.is_sym(d) and d in self.symbols for d in t.shape):
            t.shape = tuple(d if self.is_sym(d) or d not in self.symbols else
                            output_dim(int(d), self, name, a, f"dim {a} of {name}") for a, d in enumerate(t.shape))

    def add_input(self, t: Tensor, name: str, dynamic: Mapping[int, str]) -> None:
        self._used.add(name)
        self.bind(t, name)
        for axis, sym in dynamic.items():
            size = t.shape[axis]
            if size in self.symbols and self.symbols[size][2] == sym:
                continue  # the same named axis on another input (a batch dim shared by x and its mask)
            if size in self.symbols:
                other = self.symbols[size]
                raise OnnxExportError(f"dynamic axes '{sym}' ({name} dim {axis}) and '{other[2]}' ({other[0]} dim "
                                      f"{other[1]}) both have size {size} in the example inputs; dynamic axes are "
                                      f"told apart by size, so give them different example sizes")
            if size < 2:
                raise OnnxExportError(f"dynamic axis '{sym}' ({name} dim {axis}) has size {size} in the example "
                                      f"input; use an example size >= 2 so it can be told from broadcast dims")
            self.symbols[size] = (name, axis, sym)
        if dynamic:
            self._input_shapes.append((t, t.shape))
            t.shape = tuple(input_dim(d, self, name, a, dynamic[a]) if a in dynamic else d
                            for a, d in enumerate(t.shape))

    def restore_inputs(self) -> None:
        """The example inputs get their plain shapes back."""
        for t, shape in self._input_shapes:
            t.shape = shape
        self._input_shapes.clear()

    # ---- symbolic sizes -----------------------------------------------------------------------------
    def is_sym(self, v: Any) -> bool:
        return isinstance(v, SymInt) and v.tracer is self

    def keep_alive(self, v: SymInt) -> None:
        self._sym_keep.append(v)  # its id names its value

    def is_dynamic(self, v: Any) -> bool:
        return self.is_sym(v) or v in self.symbols

    def size_value(self, v: Any) -> str:
        """A 1-D int64 [v] value: a SymInt's computation, a dynamic axis's size, or a constant."""
        if self.is_sym(v):
            name: str = v.value_name(self)
            return name
        return self.dim_value(int(v))

    def check_sizes(self, static_shapes: Mapping[str, tuple[int, ...]]) -> None:
        """A dynamic axis whose example size also occurs in a weight's shape would be ambiguous."""
        for size, (inp, axis, sym) in self.symbols.items():
            for key, shape in static_shapes.items():
                if size in shape:
                    raise OnnxExportError(f"the example size {size} of dynamic axis '{sym}' ({inp} dim {axis}) also "
                                          f"appears in the shape {shape} of '{key}'; dynamic dims are recognized by "
                                          f"size, so pick another example size")

    def name_of(self, t: Tensor) -> str:
        hit = self._names.get(id(t))
        if hit is not None:
            return hit
        named = self._named.get(id(t))
        if named is not None:
            key, _ = named
            self._used.add(key)
            self.initializers[key] = (_host(t), t.dtype)
            self.bind(t, key)
            return key
        alias = self._alias(t)
        if alias is not None:  # x.detach(): the same values under another Tensor object
            self.bind(t, alias)
            return alias
        if id(t._storage) in self._storages:
            raise OnnxExportError(f"a tensor of shape {t.shape} shares memory with a traced value but was not made by "
                                  f"an op or view (an in-place write or a raw view?); it cannot be exported")
        return self._constant(t)

    def _alias(self, t: Tensor) -> str | None:
        for other in self._storages.get(id(t._storage), ()):
            if other.shape == t.shape and other._strides == t._strides and other._offset == t._offset:
                return self._names[id(other)]
        return None

    def is_traced(self, t: Tensor) -> bool:
        """Whether t was computed from the graph's inputs (not a weight or a constant)."""
        name = self._names.get(id(t))
        return name is not None and name not in self.initializers

    def _constant(self, t: Tensor) -> str:
        if t._storage.version:
            raise OnnxExportError(f"a tensor of shape {t.shape} was filled by an in-place write while tracing (not by "
                                  f"an op); it cannot be exported")
        value = _host(t)
        dynamic = [d for d in t.shape if self.is_dynamic(d)]
        if dynamic:
            causal = self._causal_bias(t, value)
            if causal is not None:
                self.bind(t, causal)
                return causal
            first = dynamic[0]
            if isinstance(first, SymInt) and self.is_sym(first):
                what = first.origin
            else:
                inp, axis, sym = self.symbols[int(first)]
                what = f"'{sym}' ({inp} dim {axis})"
            raise OnnxExportError(f"a constant of shape {tuple(int(d) for d in t.shape)} made outside the traced ops "
                                  f"(from Python values: a list, numpy, rm.tensor) and used at {user_line()} has a "
                                  f"dim of the size of the dynamic axis {what} ({int(first)}); it would be frozen at "
                                  f"that size. Build it from the inputs with tensor ops (rm.arange / rm.zeros / "
                                  f"rm.ones / view of sizes read from x.shape follow the axis), export that axis as "
                                  f"static, or use other example sizes if the size only happens to be equal")
        name = self.const(value, t.dtype)
        self.bind(t, name)
        return name

    def _causal_bias(self, t: Tensor, value: np.ndarray) -> str | None:
        """The additive causal mask [T, T] (0 on and below the diagonal, -inf above) becomes Trilu of a -inf
        fill, so it follows the sequence length."""
        if t.ndim != 2 or t.shape[0] != t.shape[1] or not t.dtype.is_floating:
            return None
        n = t.shape[0]
        expected = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, 0.0)
        if not np.array_equal(value.astype(np.float64), expected):
            return None
        fill, out = self.fresh("causal_fill"), self.fresh("causal_bias")
        neg = np.asarray([-np.inf]).astype(np.float32 if t.dtype.name == "bfloat16" else t.dtype.numpy)
        self.nodes.append(OnnxNode("ConstantOfShape", [self.shape_tensor(t.shape)], [fill], {"value": neg}))
        self.nodes.append(OnnxNode("Trilu", [fill, self.const(1, "int64")], [out], {"upper": 1}))
        return out

    def const(self, value: Any, dtype: DType | str) -> str:
        from rumus_contracts import parse_dtype
        dt = parse_dtype(dtype) if isinstance(dtype, str) else dtype
        arr = np.asarray(value, dtype=np.float32 if dt.name == "bfloat16" else dt.numpy)
        key = (arr.tobytes(), dt.name, arr.shape)
        hit = self._consts.get(key)
        if hit is None:
            hit = self._consts[key] = self.fresh(f"const_{len(self._consts)}")
            self.initializers[hit] = (arr, dt)
        return hit

    # ---- shapes that follow dynamic axes ----------------------------------------------------------
    def dim_value(self, size: int) -> str:
        """A 1-D int64 [size] value: computed from the input's shape when size is a dynamic axis."""
        if self.is_sym(size):
            return self.size_value(size)
        size = int(size)
        if size not in self.symbols:
            return self.const(np.asarray([size], dtype=np.int64), "int64")
        hit = self._dims.get(size)
        if hit is None:
            inp, axis, sym = self.symbols[size]
            shape, hit = self.fresh(f"{sym}_shape"), self.fresh(sym)
            self.nodes.append(OnnxNode("Shape", [inp], [shape], {"start": axis, "end": axis + 1}))
            self.nodes.append(OnnxNode("Identity", [shape], [hit]))
            self._dims[size] = hit
        return hit

    def shape_tensor(self, shape: Sequence[int], wildcard: int | None = None) -> str:
        """1-D int64 holding `shape`; dims of a dynamic axis's size are read from that input at run time;
        dim `wildcard` (if given) is -1."""
        if wildcard is None and not any(self.is_dynamic(d) for d in shape):
            return self.const(np.asarray([int(d) for d in shape], dtype=np.int64), "int64")
        # a shape that carries SymInts got them wherever a size came from an input: its plain ints are static
        exact = any(self.is_sym(d) for d in shape)
        parts = [self.const(np.asarray([-1], dtype=np.int64), "int64") if i == wildcard else
                 self.const(np.asarray([int(d)], dtype=np.int64), "int64") if exact and not self.is_sym(d) else
                 self.size_value(d) for i, d in enumerate(shape)]
        if len(parts) == 1:
            return parts[0]
        out = self.fresh("shape")
        self.nodes.append(OnnxNode("Concat", parts, [out], {"axis": 0}))
        return out

    # ---- hooks ------------------------------------------------------------------------------------
    def __call__(self, schema: OpSchema, inputs: Sequence[Tensor], outputs: Sequence[Tensor],
                 attrs: Mapping[str, Any]) -> None:
        if self.here():
            self.on_op(schema, inputs, outputs, attrs)

    def here(self) -> bool:
        """Whether the calling thread is the one being traced (and is not running a module lowered whole)."""
        return threading.get_ident() == self.thread and not self._paused

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Run ops untraced: what they compute is recorded by the caller as one lowering."""
        saved, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = saved

    def composite(self, fn: Any, schema: OpSchema, args: Sequence[Any], attrs: Mapping[str, Any]) -> list[Tensor]:
        """A composite with a lowering of its own (mean divides by a count that must follow dynamic axes):
        run it untraced, record it as one op."""
        if not self.here():
            res = fn(*args, **attrs)
            return list(res) if isinstance(res, tuple) else [res]
        from .. import _dispatch, _views
        saved = _dispatch._tracer, _views._tracer
        _dispatch._tracer, _views._tracer = None, None
        try:
            res = fn(*args, **attrs)
        finally:
            _dispatch._tracer, _views._tracer = saved
        outs = list(res) if isinstance(res, tuple) else [res]
        if all(isinstance(a, Tensor) for a in args):
            self.on_op(schema, list(args), outs, schema.bind_attrs(attrs))
        else:
            raise OnnxExportError(f"op '{schema.name}' was called with Python numbers; pass tensors to export it")
        return outs

    def on_op(self, schema: OpSchema, inputs: Sequence[Tensor], outputs: Sequence[Tensor],
              attrs: Mapping[str, Any]) -> None:
        if schema.onnx is None:
            raise OnnxExportError(f"op '{schema.name}' has no ONNX lowering, so a model using it cannot be exported; "
                                  f"its schema must declare one (OpSchema.onnx, see rumus_contracts.onnx_lowering)")
        if schema.inplace:
            raise OnnxExportError(f"op '{schema.name}' updates tensors in place; in-place ops cannot be exported")
        ins = [self.name_of(t) for t in inputs]
        outs = [self.fresh(f"{schema.name}_out") for _ in outputs]
        nodes = schema.onnx(_Ctx(self, schema.name, inputs, outputs), ins, outs, attrs)
        self.nodes.extend(nodes)
        for t, name in zip(outputs, outs):
            self.bind_traced(t, name)

    def on_view(self, name: str, base: Tensor, out: Tensor, attrs: Mapping[str, Any]) -> None:
        if not self.here():
            return
        src = self.name_of(base)
        dst = self.fresh(f"{name}_out")
        self.nodes.extend(lower_view(self, name, base.shape, out.shape, attrs, src, dst))
        self.bind_traced(out, dst)

    def on_cat(self, tensors: Sequence[Tensor], dim: int, out: Tensor) -> None:
        ins = [self.name_of(t) for t in tensors if t.numel() or t is tensors[0]]
        dst = self.fresh("cat_out")
        self.nodes.append(OnnxNode("Concat", ins, [dst], {"axis": dim % out.ndim}))
        self.bind_traced(out, dst)

    def output_name(self, t: Tensor) -> str:
        return self.name_of(t)

    def check_versions(self) -> None:
        for t, version in self._versions:
            if t._storage.version != version:
                raise OnnxExportError(f"a traced tensor of shape {t.shape} was written in place after it was made; "
                                      f"in-place writes cannot be exported (use out-of-place ops)")


class _Nodes(list[OnnxNode]):
    """The traced nodes, each with the user's source line it came from (`sources`), for error messages."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def append(self, node: OnnxNode) -> None:
        super().append(node)
        self.sources.append(user_line())

    def extend(self, nodes: Any) -> None:
        nodes = list(nodes)
        super().extend(nodes)
        self.sources.extend([user_line()] * len(nodes))


def _host(t: Tensor) -> np.ndarray:
    """The tensor's values; bfloat16 as its raw 16-bit patterns (ONNX stores bfloat16 that way)."""
    if t.dtype.name == "bfloat16":
        return np.asarray(t._storage.backend.to_numpy(t._arg)).reshape(t.shape).view(np.uint16)
    return np.asarray(t.numpy()).reshape(t.shape)

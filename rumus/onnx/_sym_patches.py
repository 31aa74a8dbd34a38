"""While tracing, the core's size arguments keep their SymInts (instead of turning them into plain ints) and
`arange` of a computed size is recorded as an ONNX Range. Installed only for the export's duration, by
swapping module attributes (as `cat` is), so the eager paths are exactly what they are outside export."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from rumus_contracts.onnx_lowering import OnnxNode, onnx_dtype

import rumus

from rumus_contracts.onnx_lowering import OnnxExportError

from .. import _advanced_index, _composites_torch, _creation, _dispatch
from ..tensor import Tensor
from ._source import is_ours, user_line
from ._symint import SymInt, output_dim
from ._trace import Tracer


def _keeping_size_int(original: Any) -> Any:
    def size_int(value: Any, what: str, where: str) -> int:
        return value if isinstance(value, SymInt) else int(original(value, what, where))
    return size_int


def _shape_args(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(s if isinstance(s, SymInt) else int(s) for s in args)


def _traced_arange(original: Any, tracer: Tracer) -> Any:
    def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
        bounds = (0, start) if end is None else (start, end)
        args = (*bounds, step)
        if not tracer.here() or not any(tracer.is_sym(v) for v in args):
            eager: Tensor = original(start, end, step, dtype=dtype, device=device, requires_grad=requires_grad)
            return eager
        plain = tuple(int(v) if isinstance(v, SymInt) else v for v in args)
        out: Tensor = original(*plain, dtype=dtype, device=device, requires_grad=requires_grad)
        all_int = all(isinstance(v, (int, np.integer)) for v in args)
        scalars = [_scalar(tracer, v, all_int) for v in args]
        rng = tracer.fresh("arange")
        tracer.nodes.append(OnnxNode("Range", scalars, [rng]))
        name = rng
        if out.dtype.name != ("int64" if all_int else "float64"):
            name = tracer.fresh("arange_cast")
            tracer.nodes.append(OnnxNode("Cast", [rng], [name], {"to": onnx_dtype(out.dtype)}))
        tracer.bind(out, name)
        origin = next(v.origin for v in args if tracer.is_sym(v))
        out.shape = (output_dim(out.shape[0], tracer, name, 0, f"the length of arange over {origin}"),)
        return out
    return arange


def _scalar(tracer: Tracer, v: Any, as_int: bool) -> str:
    """A 0-d Range bound: int64 when every bound is an int, float64 otherwise (numpy's arange computes so)."""
    if not tracer.is_sym(v):
        if as_int:
            return tracer.const(np.asarray(int(v), dtype=np.int64), "int64")
        if not math.isfinite(float(v)):
            raise ValueError(f"arange bound {v} is not finite")
        return tracer.const(np.asarray(float(v), dtype=np.float64), "float64")
    out = tracer.fresh("bound")
    tracer.nodes.append(OnnxNode("Squeeze", [tracer.size_value(v)], [out]))
    if as_int:
        return out
    cast = tracer.fresh("bound_f64")
    tracer.nodes.append(OnnxNode("Cast", [out], [cast], {"to": 11}))  # DOUBLE
    return cast


def _traced_triangle(original: Any, tracer: Tracer) -> Any:
    """tril / triu as ONNX Trilu (their eager mask is a host constant of the example's size)."""
    def triangle(name: str, x: Tensor, diagonal: int, lower: bool) -> Tensor:
        if not tracer.here():
            return original(name, x, diagonal, lower)  # type: ignore[no-any-return]
        src = tracer.name_of(x)
        with tracer.paused():
            out: Tensor = original(name, x, diagonal, lower)
        dst = tracer.fresh(name)
        tracer.nodes.append(OnnxNode("Trilu", [src, tracer.const(np.asarray(int(diagonal), dtype=np.int64), "int64")],
                                     [dst], {"upper": 0 if lower else 1}))
        tracer.bind_traced(out, dst)
        return out
    return triangle


def _traced_scalar(original: Any, tracer: Tracer) -> Any:
    """A SymInt used as an operand (`arange(S) < S - 1`) is its run-time value, not a cached constant."""
    def scalar_tensor(value: Any, dtype: Any, device: Any) -> Tensor:
        if not (tracer.here() and tracer.is_sym(value)):
            return original(value, dtype, device)  # type: ignore[no-any-return]
        with tracer.paused():
            t: Tensor = _creation.full((), int(value), dtype=dtype, device=device)
        name = tracer.fresh("size_scalar")
        tracer.nodes.append(OnnxNode("Squeeze", [tracer.size_value(value)], [name]))
        if dtype.name != "int64":
            cast = tracer.fresh("size_scalar_cast")
            tracer.nodes.append(OnnxNode("Cast", [name], [cast], {"to": onnx_dtype(dtype)}))
            name = cast
        tracer.bind(t, name)
        return t
    return scalar_tensor


def _guarded_numpy(original: Any, tracer: Tracer) -> Any:
    """Reading a value computed from the inputs on the host (.numpy(), .item(), .tolist(), float(), bool(), a
    tensor used as a Python index) would put the example's numbers into the file as constants: refused, naming
    the line."""
    readers = original.__code__.co_filename  # tensor.py: .item(), float(), bool() read through .numpy()

    def numpy(self: Tensor) -> Any:
        # the core itself reads single values to check arguments (index ranges of one_hot): those stay allowed
        if tracer.here() and tracer.is_traced(self) and (self.numel() != 1 or _from_user(readers)):
            raise OnnxExportError(f"the values of a tensor of shape {tuple(int(d) for d in self.shape)} computed from "
                                  f"the inputs were read into Python at {user_line()} (.item(), .tolist(), .numpy(), "
                                  f"float(), int(), bool(), print, or indexing with it by a path that reads it); the "
                                  f"file would hold the example's values as constants. Keep them in tensors: "
                                  f"rm.where, gather, index_select, masked_fill, x[:, idx] with one integer index "
                                  f"tensor, comparisons instead of Python if")
        return original(self)
    return numpy


def _from_user(readers: str) -> bool:
    """Whether the host read comes from the model's code: the first caller outside this file and tensor.py's
    readers (.item(), float(), ...) is not rumus."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == readers:
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and not is_ours(frame)


def _traced_getitem(original: Any, tracer: Tracer) -> Any:
    """x[idx] / x[:, idx] with one 1-D integer tensor computed from the inputs: index_select of its wrapped
    values, in the graph (the eager path reads the index on the host)."""
    def getitem(x: Tensor, index: Any) -> Tensor:
        items = index if type(index) is tuple else (index,)
        picked = [(d, i) for d, i in enumerate(items) if not (type(i) is slice and i == slice(None))]
        if tracer.here() and len(picked) == 1 and len(items) <= x.ndim:
            d, idx = picked[0]
            if isinstance(idx, Tensor) and tracer.is_traced(idx) and idx.ndim == 1 and idx.dtype.name in ("int64",
                                                                                                          "int32"):
                from .. import _indexing, _math
                wrapped = _math.where(_math.lt(idx, 0), _math.add(idx, x.shape[d]), idx)
                return _indexing.index_select(x, d, wrapped)
        return original(x, index)  # type: ignore[no-any-return]
    return getitem


def _uncached_shapes(self: Any, inputs: Any, attrs: dict[str, Any]) -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = self.schema.shape([t.shape for t in inputs], attrs)
    return shapes


@contextmanager
def symbolic_sizes(tracer: Tracer) -> Iterator[None]:
    original_arange = _creation.arange
    traced = _traced_arange(original_arange, tracer)
    swaps: list[tuple[Any, str, Any]] = [(_creation, "_size_int", _keeping_size_int(_creation._size_int)),
                                         (sys.modules[Tensor.__module__], "_shape_args", _shape_args),
                                         (_composites_torch, "_triangle",
                                          _traced_triangle(_composites_torch._triangle, tracer)),
                                         # the dispatcher's memos are keyed by shapes equal to the SymInts'
                                         # numbers: their answers would hold plain (or another trace's) sizes
                                         (_dispatch, "_plan_key", lambda *a: None),
                                         (_dispatch, "_planned_paths", False),
                                         (_dispatch, "scalar_tensor", _traced_scalar(_dispatch.scalar_tensor, tracer)),
                                         (_dispatch.Op, "_shapes", _uncached_shapes)]
    swaps += [(Tensor, "numpy", _guarded_numpy(Tensor.numpy, tracer)),
              (_advanced_index, "getitem", _traced_getitem(_advanced_index.getitem, tracer))]
    swaps += [(mod, "arange", traced) for mod in (_creation, rumus) if getattr(mod, "arange", None) is original_arange]
    saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in swaps]
    for mod, attr, new in swaps:
        setattr(mod, attr, new)
    try:
        yield
    finally:
        for mod, attr, old in saved:
            setattr(mod, attr, old)

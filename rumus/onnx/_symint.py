"""Sizes that follow dynamic axes while a model is traced for export.

A dynamic axis of an example input gets a `SymInt` in that input's shape for the length of the trace: an int
(so every shape computation, kernel and comparison sees the example's number) that also knows how to compute
itself in the graph. Arithmetic on it (B * S, S - 1, C // H) gives SymInts, and shapes built from those keep
them, so `arange(S)`, `view(B, S, H, D)`, `x[:, :S - 1]`, `zeros(B, S)` and `expand(*y.shape)` export as
Shape / arithmetic / Range / Reshape nodes instead of numbers frozen at the example's size.

A SymInt belongs to one trace: a stale one (kept in some cache across exports) is just its number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rumus_contracts.onnx_lowering import OnnxNode

from ._source import caller_is_user

if TYPE_CHECKING:
    from ._trace import Tracer

# ONNX ops on 1-D int64 [1] values. Sizes are non-negative, where ONNX's truncating Div equals Python's //.
_ONNX_OP = {"add": "Add", "sub": "Sub", "mul": "Mul", "floordiv": "Div", "mod": "Mod"}


class SymInt(int):
    """An int read from a traced tensor's shape; `origin` says where (for error messages)."""

    tracer: Tracer
    origin: str
    _make: Callable[[Tracer], str]

    def __new__(cls, value: int, tracer: Tracer, origin: str, make: Callable[[Tracer], str]) -> SymInt:
        self = super().__new__(cls, value)
        self.tracer, self.origin, self._make = tracer, origin, make
        return self

    def value_name(self, tracer: Tracer) -> str:
        """The graph value (1-D int64, one element) that holds this size at run time."""
        cache = tracer.sym_names
        hit = cache.get(id(self))
        if hit is None:
            hit = cache[id(self)] = self._make(tracer)
            tracer.keep_alive(self)
        return hit

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __index__(self) -> int:
        return int.__int__(self)

    # ---- the size leaves the graph: a plain Python number from here on ----------------------------------
    # (recorded when the user's code does it, so that a graph that then changes with the size names the line)
    def _frozen(self, how: str) -> None:
        where = caller_is_user(2)
        if where is not None:
            self.tracer.frozen.append((self.origin, how, where))

    def __int__(self) -> int:
        self._frozen("int()")
        return int.__int__(self)

    def __float__(self) -> float:
        self._frozen("float() (math.sqrt, math.log, ... of a size)")
        return int.__float__(self)

    def __truediv__(self, o: Any) -> Any:
        self._frozen("true division (/)")
        return int.__truediv__(self, o)

    def __rtruediv__(self, o: Any) -> Any:
        self._frozen("true division (/)")
        return int.__rtruediv__(self, o)

    def __pow__(self, o: Any, mod: Any = None) -> Any:
        self._frozen("**")
        return int.__pow__(self, o, mod)

    def __rpow__(self, o: Any, mod: Any = None) -> Any:
        self._frozen("**")
        return int.__rpow__(self, o, mod)

    def _arith(self, other: Any, name: str, reflected: bool) -> Any:
        if not isinstance(other, (int, np.integer)) or isinstance(other, bool):
            return NotImplemented
        a, b = (int(other), int(self)) if reflected else (int(self), int(other))
        value = {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0, "mod": a % b if b else 0}
        if name in ("floordiv", "mod") and not b:
            raise ZeroDivisionError("integer division or modulo by zero")
        left, right = (other, self) if reflected else (self, other)
        tracer = self.tracer

        def make(tr: Tracer) -> str:
            out = tr.fresh(f"size_{name}")
            tr.nodes.append(OnnxNode(_ONNX_OP[name], [tr.size_value(left), tr.size_value(right)], [out]))
            return out
        return SymInt(value[name], tracer, f"{self.origin} ({name})", make)

    def __add__(self, o: Any) -> Any:
        return self._arith(o, "add", False)

    def __radd__(self, o: Any) -> Any:
        return self._arith(o, "add", True)

    def __sub__(self, o: Any) -> Any:
        return self._arith(o, "sub", False)

    def __rsub__(self, o: Any) -> Any:
        return self._arith(o, "sub", True)

    def __mul__(self, o: Any) -> Any:
        return self._arith(o, "mul", False)

    def __rmul__(self, o: Any) -> Any:
        return self._arith(o, "mul", True)

    def __floordiv__(self, o: Any) -> Any:
        return self._arith(o, "floordiv", False)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._arith(o, "floordiv", True)

    def __mod__(self, o: Any) -> Any:
        return self._arith(o, "mod", False)

    def __rmod__(self, o: Any) -> Any:
        return self._arith(o, "mod", True)

    def __neg__(self) -> Any:
        return self._arith(0, "sub", True)

    def __pos__(self) -> Any:
        return self



def input_dim(value: int, tracer: Tracer, input_name: str, axis: int, symbol: str) -> SymInt:
    return SymInt(value, tracer, f"'{symbol}' ({input_name} dim {axis})", lambda tr: tr.dim_value(int(value)))


def output_dim(value: int, tracer: Tracer, name: str, axis: int, origin: str) -> SymInt:
    """Dim `axis` of the traced value `name` (an op whose output length follows its inputs' values)."""
    def make(tr: Tracer) -> str:
        shape = tr.fresh(f"{name}_dim{axis}")
        tr.nodes.append(OnnxNode("Shape", [name], [shape], {"start": axis, "end": axis + 1}))
        return shape
    return SymInt(value, tracer, origin, make)

"""ONNX renderer of the expression table: every elementwise op written once in ops/expressions.py gets an
ONNX lowering from its expression, the way the C and WGSL kernels are rendered from it.

A rendered value is an ONNX value name; each primitive appends the nodes computing it. Ops with a
hand-written lowering (one ONNX node, e.g. Relu or Gelu) keep theirs; this covers the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..ops.expr_lang import Renderer, Unsupported
from ..ops.expressions import Expr
from . import Lowering, LoweringContext, OnnxNode, onnx_dtype

_BINOPS = {"+": "Add", "-": "Sub", "*": "Mul", "/": "Div"}
_CMPS = {"<": "Less", "<=": "LessOrEqual", ">": "Greater", ">=": "GreaterOrEqual", "==": "Equal"}
_ONE_NODE = {"exp": "Exp", "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos", "tanh": "Tanh",
             "sigmoid": "Sigmoid", "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "abs": "Abs",
             "rint": "Round", "isnan": "IsNaN", "isinf": "IsInf", "pow": "Pow", "max": "Max", "min": "Min"}


class OnnxRenderer(Renderer):
    """Primitives as ONNX nodes over the op's value type `dtype` (a rumus dtype name)."""

    def __init__(self, ctx: LoweringContext, dtype: str) -> None:
        self.ctx, self.dtype, self.nodes = ctx, dtype, list[OnnxNode]()
        self.is_float = dtype.startswith(("float", "bfloat"))

    def _emit(self, op_type: str, inputs: Sequence[str], hint: str = "e", **attrs: Any) -> str:
        out = self.ctx.fresh(hint)
        self.nodes.append(OnnxNode(op_type, list(inputs), [out], attrs))
        return out

    def const(self, v: float) -> str:
        if not self.is_float and v != int(v):
            raise Unsupported(f"the non-integer constant {v} in an integer expression")
        return self.ctx.const(v if self.is_float else int(v), self.dtype)

    def let_ref(self, name: str) -> str:
        raise AssertionError("render() is overridden: lets are bound to value names directly")

    def render(self, src: str, names: dict[str, str]) -> tuple[list[tuple[str, str, str]], tuple[str, str]]:
        # lets are ONNX values already: bind the name to the value instead of a reference to a local
        from ..ops.expr_lang import parse
        prog = parse(src)
        env: dict[str, tuple[str, str]] = {k: (v, "T") for k, v in names.items()}
        for name, node in prog.lets:
            v = self.node(node, env)
            env[name] = (self.const(float(v[0])), "T") if v[1] == "c" else v
        return [], self.node(prog.result, env)

    def neg(self, a: str) -> str:
        return self._emit("Neg", [a])

    def binop(self, op: str, a: str, b: str) -> str:
        if op in _BINOPS:
            return self._emit(_BINOPS[op], [a, b])
        if not self.is_float:  # ONNX Mod(fmod=0) is Python's rule on integers; integer // is derived from it
            rem = self._emit("Mod", [a, b], fmod=0)
            return rem if op == "%" else self._emit("Div", [self._emit("Sub", [a, rem]), b])
        floor = self._emit("Floor", [self._emit("Div", [a, b])])
        return floor if op == "//" else self._emit("Sub", [a, self._emit("Mul", [b, floor])])

    def cmp(self, op: str, a: str, b: str) -> str:
        if op == "!=":
            return self._emit("Not", [self._emit("Equal", [a, b])])
        return self._emit(_CMPS[op], [a, b])

    def bool_cmp(self, op: str, a: str, b: str) -> str:
        return self.cmp(op, a, b)

    def logic(self, op: str, a: str, b: str) -> str:
        return self._emit("And" if op == "and" else "Or", [a, b])

    def not_(self, a: str) -> str:
        return self._emit("Not", [a])

    def select(self, c: str, a: str, b: str) -> str:
        return self._emit("Where", [c, a, b])

    def call(self, fn: str, args: list[str]) -> str:
        x = args[0]
        if fn in _ONE_NODE:
            return self._emit(_ONE_NODE[fn], args)
        if fn == "log1p":
            return self._emit("Log", [self._emit("Add", [x, self.const(1.0)])])
        if fn == "expm1":
            return self._emit("Sub", [self._emit("Exp", [x]), self.const(1.0)])
        if fn == "rsqrt":
            return self._emit("Reciprocal", [self._emit("Sqrt", [x])])
        if fn == "phi":  # 0.5 (1 + erf(x / sqrt 2))
            e = self._emit("Erf", [self._emit("Mul", [x, self.const(1 / math.sqrt(2.0))])])
            return self._emit("Mul", [self._emit("Add", [e, self.const(1.0)]), self.const(0.5)])
        if fn == "trunc":
            neg = self._emit("Less", [x, self.const(0.0)])
            return self._emit("Where", [neg, self._emit("Ceil", [x]), self._emit("Floor", [x])])
        if fn == "fmod":
            return self._emit("Mod", args, fmod=1)
        if fn == "isfinite":
            bad = self._emit("Or", [self._emit("IsNaN", [x]), self._emit("IsInf", [x])])
            return self._emit("Not", [bad])
        if fn == "atan2":  # ONNX has Atan only: atan(a / b), moved by +-pi where b < 0; 0 where a = b = 0
            a, b = args
            t = self._emit("Atan", [self._emit("Div", [a, b])])
            shift = self._emit("Where", [self._emit("Less", [a, self.const(0.0)]), self.const(-math.pi),
                                         self.const(math.pi)])
            r = self._emit("Where", [self._emit("Less", [b, self.const(0.0)]), self._emit("Add", [t, shift]), t])
            zero = self.const(0.0)
            both = self._emit("And", [self._emit("Equal", [a, zero]), self._emit("Equal", [b, zero])])
            return self._emit("Where", [both, zero, r])
        if fn == "truthy":
            return self._emit("Cast", [x], to=onnx_dtype("bool"))
        raise Unsupported(f"{fn} has no ONNX form here")


def table_lowering(op: str, e: Expr) -> Lowering:
    """The lowering of table op `op`: its expression rendered as ONNX nodes, the result named outs[0]."""
    def lower(ctx: LoweringContext, ins: Sequence[str], outs: Sequence[str], a: Mapping[str, Any]) -> list[OnnxNode]:
        from . import OnnxExportError
        dtype = ctx.input_dtypes[0].name
        r = OnnxRenderer(ctx, dtype)
        names = dict(zip(e.inputs, ins))
        for p, default in e.params.items():
            names[p] = ctx.const(float(a.get(p, default)), dtype)
        try:
            _, (res, typ) = r.render(e.body, names)
        except Unsupported as exc:
            raise OnnxExportError(f"op '{op}' ({dtype}) cannot be exported to ONNX: {exc}") from None
        if typ == "c":
            res = r.const(float(res))
        return [*r.nodes, OnnxNode("Identity", [res], list(outs))]
    return lower

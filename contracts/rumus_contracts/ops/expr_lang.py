"""The expression language of expressions.py, and the walk every renderer shares.

An expression is Python syntax: `name = expr;` lets, then the result expression. It may use the op's
inputs and parameters by name, number literals, + - * / // % (// and % with Python's floor rule),
unary -, comparisons, and/or/not, and the functions in FUNCTIONS. A renderer (C, WGSL, numpy) is a
table of small methods, one per primitive, in the manner of tinygrad's renderers; a primitive a
language cannot express for a dtype raises Unsupported, and the backend then claims no kernel for
that (op, dtype).  Stdlib only (imported by the C build).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .expressions import Expr

# name: (arity, result type): "T" is the value type of the op's inputs
FUNCTIONS: dict[str, tuple[int, str]] = {
    **{f: (1, "T") for f in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                             "erf", "phi", "floor", "ceil", "trunc", "rint", "abs")},
    **{f: (2, "T") for f in ("pow", "fmod", "atan2", "max", "min")},
    **{f: (1, "bool") for f in ("isnan", "isinf", "isfinite", "truthy")},
    "where": (3, "T"),
}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class Unsupported(Exception):
    """A renderer cannot express this primitive for this dtype: no kernel is claimed for it."""


@dataclass(frozen=True)
class Program:
    lets: tuple[tuple[str, ast.expr], ...]
    result: ast.expr


def parse(src: str) -> Program:
    module = ast.parse("\n".join(part.strip() for part in src.split(";")))
    lets: list[tuple[str, ast.expr]] = []
    for stmt in module.body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ValueError(f"expression {src!r}: only `name = expr;` may precede the result")
        lets.append((stmt.targets[0].id, stmt.value))
    last = module.body[-1]
    if not isinstance(last, ast.Expr):
        raise ValueError(f"expression {src!r} must end with an expression")
    return Program(tuple(lets), last.value)


# A rendered value: (text, type) with type "T", "bool" or "c" (a number not yet given a type).
Value = tuple[str, str]


class Renderer:
    """Walks a Program; subclasses give one method per primitive over rendered operand texts."""

    def render(self, src: str, names: dict[str, str]) -> tuple[list[tuple[str, str, str]], Value]:
        """(lets as (name, text, type), result). `names` maps inputs/params to their texts."""
        prog = parse(src)
        env: dict[str, Value] = {k: (v, "T") for k, v in names.items()}
        lets = []
        for name, node in prog.lets:
            text, typ = self._typed(self.node(node, env))
            lets.append((name, text, typ))
            env[name] = (self.let_ref(name), typ)
        return lets, self.node(prog.result, env)

    def _typed(self, v: Value) -> Value:
        return (self.const(float(v[0])), "T") if v[1] == "c" else v

    def node(self, n: ast.expr, env: dict[str, Value]) -> Value:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return repr(float(n.value)), "c"
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise ValueError(f"unknown name {n.id!r} in an expression")
            return env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            v = self.node(n.operand, env)
            return (repr(-float(v[0])), "c") if v[1] == "c" else (self.neg(v[0]), "T")
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return self.not_(self._bool(self.node(n.operand, env))), "bool"
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            a, b = self.node(n.left, env), self.node(n.right, env)
            op = _BINOPS[type(n.op)]
            if a[1] == b[1] == "c":
                return repr(_fold(op, float(a[0]), float(b[0]))), "c"
            return self.binop(op, self._typed(a)[0], self._typed(b)[0]), "T"
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMPOPS:
            a, b = self.node(n.left, env), self.node(n.comparators[0], env)
            if a[1] == "bool" or b[1] == "bool":
                return self.bool_cmp(_CMPOPS[type(n.ops[0])], self._bool(a), self._bool(b)), "bool"
            return self.cmp(_CMPOPS[type(n.ops[0])], self._typed(a)[0], self._typed(b)[0]), "bool"
        if isinstance(n, ast.BoolOp):
            texts = [self._bool(self.node(v, env)) for v in n.values]
            out = texts[0]
            for t in texts[1:]:
                out = self.logic("and" if isinstance(n.op, ast.And) else "or", out, t)
            return out, "bool"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in FUNCTIONS:
            arity, result = FUNCTIONS[n.func.id]
            if len(n.args) != arity or n.keywords:
                raise ValueError(f"{n.func.id} takes {arity} arguments")
            if n.func.id == "where":
                cond = self._bool(self.node(n.args[0], env))
                then, other = (self._typed(self.node(v, env))[0] for v in n.args[1:])
                return self.select(cond, then, other), "T"
            args = [self._typed(self.node(v, env))[0] for v in n.args]
            return self.call(n.func.id, args), result
        raise ValueError(f"unsupported syntax in an expression: {ast.dump(n)}")

    def _bool(self, v: Value) -> str:
        if v[1] != "bool":
            raise ValueError("a condition must be a comparison, a logic op or a bool function")
        return v[0]

    # ---- the primitives (one small method each) -------------------------------------------------
    def const(self, v: float) -> str: raise NotImplementedError
    def let_ref(self, name: str) -> str: return name
    def neg(self, a: str) -> str: raise NotImplementedError
    def binop(self, op: str, a: str, b: str) -> str: raise NotImplementedError
    def cmp(self, op: str, a: str, b: str) -> str: raise NotImplementedError
    def bool_cmp(self, op: str, a: str, b: str) -> str:
        if op not in ("==", "!="):
            raise Unsupported(f"ordering of bools ({op})")
        return f"({a} {op} {b})"
    def logic(self, op: str, a: str, b: str) -> str: raise NotImplementedError
    def not_(self, a: str) -> str: return f"(!{a})"
    def select(self, c: str, a: str, b: str) -> str: raise NotImplementedError
    def call(self, fn: str, args: list[str]) -> str: raise NotImplementedError


def _fold(op: str, a: float, b: float) -> float:
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else float("nan"), "//": a // b if b else 0.0,
            "%": a % b if b else 0.0}[op]


_PY_BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floor_divide", "%": "remainder"}
_PY_CMPS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


class PythonRenderer(Renderer):
    """Python source over a namespace P of primitives (P.add, P.lt, P.where, P.fn[name], P.const):
    numpy (float64 references) and the core's differentiable ops each supply one."""

    def const(self, v: float) -> str: return f"P.const({v!r})"
    def neg(self, a: str) -> str: return f"P.neg({a})"
    def binop(self, op: str, a: str, b: str) -> str: return f"P.{_PY_BINOPS[op]}({a}, {b})"
    def cmp(self, op: str, a: str, b: str) -> str: return f"P.{_PY_CMPS[op]}({a}, {b})"
    def bool_cmp(self, op: str, a: str, b: str) -> str: return self.cmp(op, a, b)
    def logic(self, op: str, a: str, b: str) -> str: return f"P.logical_{op}({a}, {b})"
    def not_(self, a: str) -> str: return f"P.logical_not({a})"
    def select(self, c: str, a: str, b: str) -> str: return f"P.where({c}, {a}, {b})"
    def call(self, fn: str, args: list[str]) -> str: return f"P.fn[{fn!r}]({', '.join(args)})"


def python_function(e: Expr, namespace: Callable[..., Any]) -> Callable[..., Any]:
    """fn(*inputs, **params): the expression evaluated in Python; `namespace(*inputs)` gives P."""
    lets, (res, typ) = PythonRenderer().render(e.body, {n: n for n in (*e.inputs, *e.params)})
    if typ == "c":
        res = f"P.const({res})"
    lines = [f"    P = NAMESPACE({', '.join(e.inputs)})", *(f"    {n} = {v}" for n, v, _ in lets),
             f"    return P.result({res})"]
    args = ", ".join([*e.inputs, *(f"{p}={d!r}" for p, d in e.params.items())])
    scope: dict[str, Any] = {"NAMESPACE": namespace}
    exec(f"def fn({args}):\n" + "\n".join(lines), scope)  # the table's own text, never user input
    fn: Callable[..., Any] = scope["fn"]
    return fn

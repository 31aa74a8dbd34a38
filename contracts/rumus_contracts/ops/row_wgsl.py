"""WGSL renderer of the row-op table (row_ops.py): the folds and stores of shaders/softmax.wgsl.

The WebGPU row kernel keeps one (max, sum) pair per invocation, merged over the row's group (subgroup
shuffles or workgroup memory), so it serves two shapes of passes:
- "online": a max over E then the sum of exp(E - max), folded in one walk (fold1 / fold4 / fold16 of
  the shader, one rescale of the running sum per vec4 or step);
- "sum": one sum (the pair's max stays 0, so merge adds the sums unscaled).
Other shapes raise Unsupported (the backend then claims no kernel for the op). Element code is over
`x` (the first input) and `w` (the second), scalars or vec4 (`v` for x there): WGSL's built-ins act per
component, and a scalar operand of + - * / meets a vector as the table writes it.
Stdlib only, like the other renderers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .expr_lang import Renderer, Unsupported
from .row_ops import ROW_OPS, RowOp

_CALLS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "inverseSqrt", "abs": "abs", "tanh": "tanh"}
_SHADER_NAMES = ("x", "w")  # the shader's names of the first and second input's element


class _WgslRenderer(Renderer):
    """f32 math with WGSL's built-ins (the row shader's own: exp and log as the hardware gives them)."""

    def const(self, v: float) -> str: return repr(v)
    def neg(self, a: str) -> str: return f"(-{a})"

    def binop(self, op: str, a: str, b: str) -> str:
        if op in ("//", "%"):
            raise Unsupported(f"{op} in a row shader")
        return f"({a} {op} {b})"

    def cmp(self, op: str, a: str, b: str) -> str: return f"({a} {op} {b})"
    def logic(self, op: str, a: str, b: str) -> str: return f"({a} {'&&' if op == 'and' else '||'} {b})"
    def select(self, c: str, a: str, b: str) -> str: return f"select({b}, {a}, {c})"

    def call(self, fn: str, args: list[str]) -> str:
        if fn not in _CALLS:
            raise Unsupported(f"{fn} in a row shader")
        return f"{_CALLS[fn]}({', '.join(args)})"


def _expr(src: str, names: dict[str, str]) -> str:
    lets, (res, typ) = _WgslRenderer().render(src, names)
    if lets:
        raise Unsupported("lets inside a row shader's element expression")
    return res


@dataclass(frozen=True)
class RowShader:
    """One op's pieces of shaders/softmax.wgsl (element code over x and w, scalar form)."""

    kind: str  # "online" or "sum"
    element: str  # online: E of the max pass; sum: the summed element
    dot: tuple[str, str]  # sum: the element as a product a * b (b 1.0 if it is none), a vec4's sum dot(a, b)
    finish: str  # WGSL lets binding the row values from acc, then the finalize lets
    out: str  # one output element
    inputs: int

    def vec(self, code: str) -> str:
        """Element code as its vec4 form (x becomes the vec4 load v; w is a vec4 load already)."""
        return re.sub(r"\bx\b", "v", code)


def row_shader(name: str) -> RowShader:
    """The WGSL pieces of row op `name`; Unsupported when the kernel's shape cannot hold its passes."""
    op: RowOp = ROW_OPS[name]
    dot = ("", "")
    if len(op.inputs) > 2 or op.columns or op.params or any(p.then for p in op.passes):
        raise Unsupported(f"row op {name}: the row shader reads at most two inputs, no column operands, "
                          f"parameters or lets between passes")
    names = dict(zip(op.inputs, _SHADER_NAMES))
    if op.online_pair():
        kind, (m, s) = "online", op.passes
        element = _expr(m.element, names)
        bound = [f"let {m.value} = acc.x;", f"let {s.value} = acc.y;"]
    elif len(op.passes) == 1 and op.passes[0].reduce == "sum":
        kind, s = "sum", op.passes[0]
        element = _expr(s.element, names)
        bound = [f"let {s.value} = acc.y;"]
        tree = ast.parse(s.element, mode="eval").body
        if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Mult):
            dot = (_expr(ast.unparse(tree.left), names), _expr(ast.unparse(tree.right), names))
    else:
        raise Unsupported(f"row op {name}: the row shader folds a (max, sum of exp) pair or one sum")
    scope = {**names, **{v: v for v in op.row_values}}
    for let, src in op.lets:
        bound.append(f"let {let} = {_expr(src, scope)};")
        scope[let] = let
    if op.uses_e():
        scope["e"] = _expr(op.passes[-1].element, {**names, **{v: v for v in op.row_values}})
    if kind == "sum" and not dot[0]:
        dot = (element, "1.0")
    return RowShader(kind, element, dot, "\n    ".join(bound), _expr(op.out, scope), len(op.inputs))

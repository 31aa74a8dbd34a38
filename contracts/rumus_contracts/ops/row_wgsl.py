"""WGSL renderer of the row-op table (row_ops.py): the folds, merges and stores of shaders/softmax.wgsl.

The WebGPU row kernel keeps one pair of f32 per invocation, merged over the row's group (subgroup
shuffles or workgroup memory), and walks the row once per Walk, then once more to store:
- "online": a max over E then the sum of exp(E - max), folded in one walk (fold1 / fold4 / fold16 of
  the shader, one rescale of the running sum per vec4 or step); the pair is (max, sum);
- "sum": the pair holds sums, merged by adding: consecutive sum passes share one walk, two at a time,
  when the later one does not use the earlier one's value (the first in acc.x, the second in acc.y; a
  walk of one sum keeps it in acc.y). A pass's `then` lets follow its walk's merge.
Other shapes raise Unsupported (the backend then claims no kernel for the op). Element code is over
`x` (the first input), `w` (the second), `c` and `d` (the column operands, read at the element's place
in the row), scalars or vec4 (`v` for x there), `n` (the row length) and the params (uniform values):
WGSL's built-ins act per component, and a scalar operand of + - * / meets a vector as the table writes
it. Stdlib only, like the other renderers.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from dataclasses import dataclass

from .expr_lang import Renderer, Unsupported
from .row_ops import ROW_OPS, Pass, RowOp, split_lets

_CALLS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "inverseSqrt", "abs": "abs", "tanh": "tanh"}
INPUT_NAMES = ("x", "w")  # the shader's names of the first and second input's element
COLUMN_NAMES = ("c", "d")  # ... and of the column operands' (a norm's weight and bias)
PARAM_FIELDS = ("param0", "param1")  # the params' f32 fields of shaders/rows.wgsl's Config
_ROW_OP_FIELDS = {"inputs", "passes", "finalize", "out", "columns", "params"}  # what row_shader renders
_PASS_FIELDS = {"value", "reduce", "element", "then"}
_SLOTS = {1: ("y",), 2: ("x", "y")}  # the acc components of a walk's sums
# names the shader's main uses: a row value, let or param of the table must not shadow them
_RESERVED = {*INPUT_NAMES, *COLUMN_NAMES, "v", "n", "t", "r", "o", "e", "lane", "valid", "base", "ib", "ob", "begin",
             "end", "delta", "acc", "ninf", "vlid", "pos", "s_in", "sout", "cfg"}


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


def _uses(src: str, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(ast.parse(src)))


@dataclass(frozen=True)
class Walk:
    """One walk over the row: what each element folds into acc, and the lets its merged pair binds."""

    kind: str  # "online" or "sum"
    elements: tuple[str, ...]  # online: (E of the max pass,); sum: the summed elements (acc.y last)
    dots: tuple[tuple[str, str], ...]  # sum: each element as a product a * b ("1.0" for b if it is none)
    bind: str  # WGSL lets binding the row values from acc, then the passes' `then` lets

    @property
    def slots(self) -> tuple[str, ...]:
        """The acc components the sums fold into."""
        return _SLOTS[len(self.elements)]


@dataclass(frozen=True)
class RowShader:
    """One op's pieces of shaders/softmax.wgsl (element code over x, w, c, d, scalar form)."""

    kind: str  # "online" (softmax's pair) or "sum"
    walks: tuple[Walk, ...]
    finish: str  # the finalize lets
    out: str  # one output element
    inputs: int
    columns: int
    params: tuple[float, ...]  # the defaults, in the op's order (the backend passes the attrs' values)
    param_names: tuple[str, ...]
    columns_in_folds: bool  # whether a walk's elements read a column operand
    keep: tuple[str, ...] = ()  # per-row values the kernel stores besides the output (row_shader's keep)

    @property
    def element(self) -> str:
        """The first walk's first element (the online walk's E)."""
        return self.walks[0].elements[0]

    def vec(self, code: str) -> str:
        """Element code as its vec4 form (x becomes the vec4 load v; w, c and d are vec4 loads already)."""
        return re.sub(r"\bx\b", "v", code)


def _sum_walks(op: RowOp, names: dict[str, str]) -> list[Walk]:
    """The sum passes grouped into walks: two consecutive passes share one when the second does not read
    the first's value or its lets."""
    groups: list[list[Pass]] = []
    for p in op.passes:
        if p.reduce != "sum":
            raise Unsupported(f"a {p.reduce} pass among sums")
        last = groups[-1] if groups else None
        if last is not None and len(last) == 1 and not last[0].then and not _uses(p.element, {last[0].value}):
            last.append(p)
        else:
            groups.append([p])
    scope = dict(names)
    walks = []
    for group in groups:
        elements, dots = [], []
        for p in group:
            elements.append(_expr(p.element, scope))
            tree = ast.parse(p.element, mode="eval").body
            if isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Mult):
                dots.append((_expr(ast.unparse(tree.left), scope), _expr(ast.unparse(tree.right), scope)))
            else:
                dots.append((elements[-1], "1.0"))
        bound = [f"let {p.value} = acc.{s};" for p, s in zip(group, _SLOTS[len(group)])]
        for p in group:
            scope[p.value] = p.value
        for p in group:
            for let, src in split_lets(p.then):
                bound.append(f"let {let} = {_expr(src, scope)};")
                scope[let] = let
        walks.append(Walk("sum", tuple(elements), tuple(dots), "\n    ".join(bound)))
    return walks


@functools.cache
def row_shader(op: str | RowOp, keep: tuple[str, ...] = ()) -> RowShader:
    """The WGSL pieces of row op `op` (a name of the table, or an entry); Unsupported when the kernel's
    shape cannot hold its passes. keep: expressions over the row values and lets that the kernel also
    stores per row (a norm's mean and rstd, for the weight gradients' column sums)."""
    name = op if isinstance(op, str) else "(entry)"
    op = ROW_OPS[op] if isinstance(op, str) else op
    # a field this renderer does not know (a row-shaped output, say) must not be dropped silently
    checks: list[tuple[RowOp | Pass, set[str]]] = [(op, _ROW_OP_FIELDS), *((p, _PASS_FIELDS) for p in op.passes)]
    for obj, known in checks:
        for f in dataclasses.fields(obj):
            if f.name not in known and getattr(obj, f.name) != f.default:
                raise Unsupported(f"row op {name}: the row shader does not render its {f.name}")
    if len(op.inputs) > len(INPUT_NAMES) or len(op.columns) > len(COLUMN_NAMES) or len(op.params) > 2:
        raise Unsupported(f"row op {name}: the row shader reads at most two inputs, two column operands and "
                          f"two parameters")
    declared = {*op.row_values, *(n for n, _ in op.lets), *(n for n, _ in op.params),
                *(n for p in op.passes for n, _ in split_lets(p.then))}
    if declared & _RESERVED:
        raise Unsupported(f"row op {name}: {sorted(declared & _RESERVED)} would shadow the row shader's names")
    names = {**dict(zip(op.inputs, INPUT_NAMES)), **dict(zip(op.columns, COLUMN_NAMES)), "n": "n",
             **{p: p for p, _ in op.params}}
    if op.online_pair():
        m, s = op.passes
        if m.then or s.then:
            raise Unsupported(f"row op {name}: lets between the online pair's passes")
        kind = "online"
        walks = [Walk("online", (_expr(m.element, names),), (), f"let {m.value} = acc.x;\n    let {s.value} = acc.y;")]
    elif all(p.reduce == "sum" for p in op.passes) and op.passes:
        kind = "sum"
        walks = _sum_walks(op, names)
    else:
        raise Unsupported(f"row op {name}: the row shader folds a (max, sum of exp) pair or sums")
    scope = {**names, **{v: v for v in op.row_values},
             **{n: n for p in op.passes for n, _ in split_lets(p.then)}}
    finish = []
    for let, src in op.lets:
        finish.append(f"let {let} = {_expr(src, scope)};")
        scope[let] = let
    if op.uses_e():
        scope["e"] = _expr(op.passes[-1].element, scope)
    in_folds = any(_uses(p.element, set(op.columns)) for p in op.passes)
    return RowShader(kind, tuple(walks), "\n    ".join(finish), _expr(op.out, scope), len(op.inputs),
                     len(op.columns), tuple(v for _, v in op.params), tuple(n for n, _ in op.params), in_folds,
                     tuple(_expr(k, scope) for k in keep))


# The norms' dx as row ops (inputs: the incoming grad g, then x; the weight a column operand), for the
# WebGPU backward ops until the table holds entries of these names (nn_norm.py takes the table's first).
# With xhat = (x - mean) * rstd: dx = rstd * (g * w - mean(g * w) - xhat * mean(g * w * xhat)), the
# last sum taken as rstd * sum(g * w * (x - mean)) (centred: no cancellation), so the passes pair up in
# two walks: (sum g * w, sum x), then (the centred squares, sum g * w * (x - mean)). RMS norm has mean 0
# and no mean(g * w) term: one walk.
NORM_DX: dict[str, RowOp] = {
    "layer_norm_backward": RowOp(
        ("g", "x"), (Pass("sgw", "sum", "g * w"), Pass("s1", "sum", "x", then="mean = s1 / n"),
                     Pass("ss", "sum", "(x - mean) * (x - mean)"), Pass("sgx", "sum", "g * w * (x - mean)")),
        "rstd = 1 / sqrt(ss / n + eps)", "rstd * (g * w - sgw / n - (x - mean) * rstd * (rstd * sgx / n))",
        columns=("w",), params=(("eps", 1e-5),)),
    "rms_norm_backward": RowOp(
        ("g", "x"), (Pass("ss", "sum", "x * x"), Pass("sgx", "sum", "g * w * x")),
        "rstd = 1 / sqrt(ss / n + eps)", "rstd * (g * w - x * rstd * (rstd * sgx / n))",
        columns=("w",), params=(("eps", 1e-6),)),
}

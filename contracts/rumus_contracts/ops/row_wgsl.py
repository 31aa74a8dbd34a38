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
in the row, or at its channel's for grouped columns: RowShader.grouped), scalars or vec4 (`v` for x
there), `n` (the row length) and the params (uniform values):
WGSL's built-ins act per component, and a scalar operand of + - * / meets a vector as the table writes
it. index_shader renders the entries that read per-row operands (cross-entropy's class index and saved
logsumexp: row_inputs, zero_if, at() in row-level lets, per_row, row_outputs, a sum pass's `when`) into
the pieces of the backend's shaders/cross_entropy.wgsl. Stdlib only, like the other renderers.
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
_ROW_OP_FIELDS = {"inputs", "passes", "finalize", "out", "columns", "params", "grouped_columns"}  # row_shader's
_PASS_FIELDS = {"value", "reduce", "element", "then"}
_SLOTS = {1: ("y",), 2: ("x", "y")}  # the acc components of a walk's sums
# names the shader's main uses: a row value, let or param of the table must not shadow them
_RESERVED = {*INPUT_NAMES, *COLUMN_NAMES, "v", "n", "t", "r", "o", "e", "lane", "valid", "base", "ib", "ob", "begin",
             "end", "delta", "acc", "ninf", "vlid", "pos", "s_in", "sout", "cfg", "gc0", "gin"}


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
    grouped: bool = False  # grouped columns (RowOp.grouped_columns): the kernel reads them per channel

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
                     tuple(_expr(k, scope) for k in keep), op.grouped_columns)


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
# group norm's dx: the layer norm's over (sample, group) rows, the weight one per channel
NORM_DX["group_norm_backward"] = dataclasses.replace(NORM_DX["layer_norm_backward"], grouped_columns=True)


# ---- row ops over per-row operands (a class index, a saved per-row value): cross-entropy --------------
# The WebGPU kernel of these ops (the backend's shaders/cross_entropy.wgsl) keeps a vec4 per invocation,
# merged over the row's group: (max, sum of exp(E - shift)) in x and y, a sum in z. Element code is over
# X_ (the input's element), C0_ (the column operand's) and I_ (the element's index, i32), placeholders
# that IndexShader.element gives the scalar or vec4 component names. An "int64" row input is a class
# index, an i32 in the shader; a param compared with an index (ignore_index) is an index param, an i32
# too (the kernel maps an index that does not fit to one that fails the range check, never to the
# param's value unless the int64s are equal). Every other name is an f32.
ELEMENT_NAMES = ("X_", "C0_", "I_")
_INDEX_RESERVED = {*ELEMENT_NAMES, "x", "x0", "v", "c0", "cv", "j", "acc", "ninf", "nn", "lane", "valid", "row", "r",
                   "at_", "err", "cfg", "lid", "wid", "zero", "end"}
_PLACEHOLDER = re.compile(r"\b(X_|C0_|I_)")


class _IndexRenderer(_WgslRenderer):
    """The row shader's f32 math, with i32 names (indices and index params) compared as i32 and turned
    into f32 where they meet arithmetic."""

    def __init__(self, ints: set[str], ninf: str = "ninf") -> None:
        self.ints, self.ninf = ints, ninf

    def _f(self, a: str) -> str:
        return f"f32({a})" if a in self.ints else a

    def binop(self, op: str, a: str, b: str) -> str: return super().binop(op, self._f(a), self._f(b))

    def cmp(self, op: str, a: str, b: str) -> str:
        if a in self.ints and b in self.ints:
            return f"({a} {op} {b})"
        return super().cmp(op, self._f(a), self._f(b))

    def select(self, c: str, a: str, b: str) -> str: return super().select(c, self._f(a), self._f(b))

    def call(self, fn: str, args: list[str]) -> str:
        if fn == "isinf":  # -ninf: +inf kept out of constant expressions, as the kernel's cfg.ninf
            return f"(abs({self._f(args[0])}) == -{self.ninf})"
        return super().call(fn, [self._f(a) for a in args])


@dataclass(frozen=True)
class IndexWalk:
    """One walk of an index row op: "online" folds (max E, sum exp(E - shift)) into acc.xy, "sum" folds
    its element into acc.z; then the group merges and `bind` binds the pass values and their lets."""

    kind: str
    element: str  # scalar WGSL over the placeholders (online: E)
    when: str = ""  # WGSL condition: false skips the walk (its sum is 0)
    uniform: bool = False  # `when` reads params and n only: the merge may be skipped with the walk
    value: str = ""  # the sum's name (sum walks)
    bind: str = ""  # WGSL lets after the merge
    # online walks: a later sum pass folded in, split at the shift x0 (_affine): the elements summed into
    # acc.z (the pass's element at x0) and acc.w (its coefficient of the late value), under this condition
    split: tuple[str, ...] = ()
    split_when: str = ""


@dataclass(frozen=True)
class IndexShader:
    """The WGSL pieces of a row op over per-row operands (row_ops.py's row_inputs, zero_if, at(),
    per_row, row_outputs), for the backend's cross-entropy kernel."""

    walks: tuple[IndexWalk, ...]
    lets: str  # the finalize lets, at(operand, index) as at_x(row, index) / at_c0(index)
    zero: str  # the zero_if condition ("" none)
    out: str  # per_row: the row's value; else one element (placeholders)
    per_row: bool
    row_outputs: tuple[str, ...]
    row_inputs: tuple[tuple[str, str], ...]  # (name, "T" | "int64")
    params: tuple[str, ...]
    index_params: tuple[str, ...]  # the params compared with an index (at most one)
    columns: int

    def element(self, code: str, k: int | None = None) -> str:
        """Element code for a scalar load (k None: x, c0, the index i32(j)) or component k of a vec4 load
        (v, cv, the index i32(j + k))."""
        if k is None:
            names = {"X_": "x", "C0_": "c0", "I_": "i32(j)"}
        else:
            comp = "xyzw"[k]
            names = {"X_": f"v.{comp}", "C0_": f"cv.{comp}", "I_": f"i32(j + {k}u)"}
        return _PLACEHOLDER.sub(lambda m: names[m.group(1)], code)


def _affine(src: str, late: set[str]) -> tuple[str, str] | None:
    """(L, dE/dL) where element expression `src` is affine in exactly one of the `late` names L (a row
    value its walk's own merge gives: the lse of the online pair), its coefficient free of L; else None.
    Then sum E(L) = sum E(x0) + (L - x0) sum dE/dL for any x0: the pass folds into the same walk."""
    tree = ast.parse(src, mode="eval").body
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & late
    if len(used) != 1:
        return None
    (lv,) = used

    def has(n: ast.expr) -> bool:
        return any(isinstance(k, ast.Name) and k.id == lv for k in ast.walk(n))

    def d(n: ast.expr) -> ast.expr | None:  # the derivative in lv, None for 0; raises ValueError: not affine
        if not has(n):
            return None
        if isinstance(n, ast.Name):
            return ast.Constant(1.0)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            a = d(n.operand)
            return None if a is None else ast.UnaryOp(ast.USub(), a)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            a, b = d(n.left), d(n.right)
            if b is None:
                return a
            if a is None:
                return b if isinstance(n.op, ast.Add) else ast.UnaryOp(ast.USub(), b)
            return ast.BinOp(a, n.op, b)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and has(n.left) != has(n.right):
            inner, other = (n.left, n.right) if has(n.left) else (n.right, n.left)
            a = d(inner)
            if a is None:
                return None
            return other if isinstance(a, ast.Constant) and a.value == 1.0 else ast.BinOp(other, ast.Mult(), a)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and not has(n.right):
            a = d(n.left)
            return None if a is None else ast.BinOp(a, ast.Div(), n.right)
        raise ValueError("not affine")
    try:
        coef = d(tree)
    except ValueError:
        return None
    return (lv, ast.unparse(coef)) if coef is not None else None


def _index_params(op: RowOp, indices: set[str]) -> tuple[str, ...]:
    """The params that a comparison sets against an index row input."""
    found = []
    sources = [op.out, op.zero_if, op.finalize, *(src for _, src in op.row_outputs),
               *(s for p in op.passes for s in (p.then, p.when, p.element))]
    for src in filter(None, sources):
        for node in ast.walk(ast.parse("\n".join(s.strip() for s in src.split(";")))):
            if isinstance(node, ast.Compare):
                sides = [n.id for n in (node.left, *node.comparators) if isinstance(n, ast.Name)]
                if set(sides) & indices:
                    found += [s for s in sides if s in {p for p, _ in op.params}]
    return tuple(dict.fromkeys(found))


def _gathered(src: str, op: RowOp, indices: set[str], lets: list[str], count: list[int]) -> str:
    """`src` (one let's expression) with every at(operand, index) replaced by a name bound in `lines` to
    the kernel's load (0 where the index is outside the row): at_x(row, t) for the input, at_c0(t) for
    the column operand; the index must be an index row input."""
    class Sub(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if not (isinstance(node.func, ast.Name) and node.func.id == "at"):
                return node
            target, idx = node.args
            if not (isinstance(target, ast.Name) and isinstance(idx, ast.Name) and idx.id in indices):
                raise Unsupported("at() in a row shader reads an operand at an index row input")
            if target.id in op.inputs[:1]:
                load = f"at_x(row, {idx.id})"
            elif target.id in op.columns[:1]:
                load = f"at_c0({idx.id})"
            else:
                raise Unsupported(f"at({target.id}, ...) in a row shader")
            name = f"at{count[0]}"
            count[0] += 1
            lets.append(f"let {name} = {load};")
            return ast.Name(name, ast.Load())
    return ast.unparse(Sub().visit(ast.parse(src, mode="eval")))


@functools.cache
def index_shader(op: str | RowOp) -> IndexShader:
    """The WGSL pieces of an op of the table that reads per-row operands (cross_entropy_fwd / _bwd);
    Unsupported for shapes the kernel cannot hold: one input, at most one column operand, four params,
    passes a (max E, then sh = where(isinf(m), 0, m), sum exp(E - sh)) pair (the kernel's merge shifts an
    infinite max by 0, the table's rule) followed by sum passes, no column sums."""
    name = op if isinstance(op, str) else "(entry)"
    op = ROW_OPS[op] if isinstance(op, str) else op
    if len(op.inputs) != 1 or len(op.columns) > 1 or len(op.params) > 4 or op.column_sums:
        raise Unsupported(f"row op {name}: the index row shader reads one input, one column operand, four "
                          f"params and writes no column sums")
    declared = {*op.row_values, *(n for n, _ in op.lets), *(n for n, _ in op.params), *(n for n, _ in op.row_inputs),
                *(n for p in op.passes for n, _ in split_lets(p.then))}
    if declared & _INDEX_RESERVED:
        raise Unsupported(f"row op {name}: {sorted(declared & _INDEX_RESERVED)} would shadow the shader's names")
    indices = {n for n, kind in op.row_inputs if kind == "int64"}
    index_params = _index_params(op, indices)
    if len(index_params) > 1:
        raise Unsupported(f"row op {name}: more than one param compared with an index")
    ints = indices | set(index_params) | {"I_"}
    r = _IndexRenderer(ints)

    def expr(src: str, names: dict[str, str]) -> str:
        lets, (res, _) = r.render(src, names)
        if lets:
            raise Unsupported("lets inside a row shader's expression")
        return res
    row_scope = {"n": "n", **{p: p for p, _ in op.params}, **{n: n for n, _ in op.row_inputs}}
    elem = {**row_scope, op.inputs[0]: "X_", **dict(zip(op.columns, ("C0_",))), "i": "I_"}
    passes = list(op.passes)
    walks: list[IndexWalk] = []
    late: set[str] = set()
    if passes and passes[0].reduce == "max":
        m = passes[0]
        s = passes[1] if len(passes) > 1 else None
        lets = split_lets(m.then)
        sh = lets[0][0] if len(lets) == 1 else ""
        if (s is None or s.reduce != "sum" or s.then.count("=") > 1 or m.when or s.when
                or not sh or not _same_src(lets[0][1], f"where(isinf({m.value}), 0, {m.value})")
                or not _same_src(s.element, f"exp(({m.element}) - {sh})")):
            raise Unsupported(f"row op {name}: the index row shader folds a max only as the shifted pair")
        bind = [f"let {m.value} = acc.x;"]
        scope = {**row_scope, m.value: m.value}
        bind.append(f"let {sh} = {expr(lets[0][1], scope)};")
        bind.append(f"let {s.value} = acc.y;")
        scope.update({sh: sh, s.value: s.value})
        for let, src in split_lets(s.then):
            bind.append(f"let {let} = {expr(src, scope)};")
            scope[let] = let
        walks.append(IndexWalk("online", expr(m.element, elem), bind="\n    ".join(bind)))
        passes = passes[2:]
        late = set(scope) - set(row_scope)  # the online walk's row values and lets
    scope = {**row_scope, **{v: v for v in op.row_values},
             **{n: n for p in op.passes for n, _ in split_lets(p.then)}}
    for p in passes:
        if p.reduce != "sum":
            raise Unsupported(f"row op {name}: a {p.reduce} pass after the index row shader's pair")
        split = _affine(p.element, late) if late and not walks[0].split and not p.then else None
        if split is not None and not (p.when and _uses(p.when, late)):
            # fold it into the online walk, shifted by the row's first element: any shift keeps the
            # algebra exact, one of the row's scale keeps the sums free of cancellation (lse - x >= 0)
            lv, coef = split
            outer = {k: v for k, v in scope.items() if k not in elem}
            when = expr(p.when, scope) if p.when else "true"
            folded = f"let {p.value} = select(0.0, acc.z + ({lv} - x0) * acc.w, {when});"
            walks[0] = dataclasses.replace(
                walks[0], split=(expr(p.element, {**elem, **outer, lv: "x0"}), expr(coef, {**elem, **outer})),
                split_when=when, bind=walks[0].bind + "\n    " + folded)
            continue
        when = expr(p.when, scope) if p.when else ""
        uniform = not p.when or not _uses(p.when, {*op.row_values, *(n for n, _ in op.row_inputs)}
                                          | {n for q in op.passes for n, _ in split_lets(q.then)})
        bind = [f"let {let} = {expr(src, scope)};" for let, src in split_lets(p.then)]
        walks.append(IndexWalk("sum", expr(p.element, {**elem, **{k: v for k, v in scope.items() if k not in elem}}),
                               when, uniform, p.value, "\n    ".join(bind)))
    finish: list[str] = []
    count = [0]
    for let, src in op.lets:
        src = _gathered(src, op, indices, finish, count)
        finish.append(f"let {let} = {expr(src, {**scope, **{f'at{k}': f'at{k}' for k in range(count[0])}})};")
        scope[let] = let
    zero = expr(op.zero_if, row_scope) if op.zero_if else ""
    if op.uses_e():
        raise Unsupported(f"row op {name}: `e` in the index row shader's output")
    out = expr(op.out, scope if op.per_row else {**scope, **{k: v for k, v in elem.items()}})
    return IndexShader(tuple(walks), "\n    ".join(finish), zero, out, op.per_row,
                       tuple(expr(src, scope) for _, src in op.row_outputs), op.row_inputs,
                       tuple(p for p, _ in op.params), index_params, len(op.columns))


def _same_src(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a, mode="eval")) == ast.dump(ast.parse(b, mode="eval"))

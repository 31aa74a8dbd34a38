"""C renderer of the row-op table (row_ops.py): the row kernels csrc/build_cpu_kernels.py compiles.

Each (op, dtype) becomes one row function `row_<op>_<sfx>` in a table that csrc/internal/row_loops.h
runs over the kept dims (each row whole on one thread of the pool, so results never depend on the thread
count). Two forms of a row:
- contiguous float32 rows: element math in float (internal/fastmath.h through expr_fns.h), max passes
  over 16 float lanes, sums over 16 double lanes, all in loops gcc vectorises (AVX-512/AVX2/SSE2 clones,
  no FMA, so every clone gives the same bits). A sum's element is computed in float and kept in the
  output row (then summed from there) where it calls exp or log or the output names it (`e`), else in
  double;
- every other row (strided, float64, float16/bfloat16 storage): all math in double, each result rounded
  once into the stored type.
The finalize step runs in double; the float form rounds its values to float once. A per-row output
(RowOp.per_row) is computed in double from the row values and rounded once; a column sum
(RowOp.column_sums) adds its element, in double, into the row partition's accumulator, which
csrc/internal/row_loops.h adds up in partition order and rounds once. Grouped columns
(RowOp.grouped_columns) take their (G, S) from prm[4] and prm[5], after the op's parameters.
Stdlib only: the build imports this without numpy.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .expr_c import WIDENED, CRenderer
from .row_ops import REDUCTIONS, ROW_OPS, RowOp, split_lets

# dtype: (C suffix, stored C type, load to double, store from double)
ROW_DTYPES: dict[str, tuple[str, str, str, str]] = {
    "float32": ("f32", "float", "RUMUS_AS_IS", "RUMUS_AS_IS"),
    "float64": ("f64", "double", "RUMUS_AS_IS", "RUMUS_AS_IS"),
    "float16": ("f16", "uint16_t", WIDENED["float16"][1], "rumus_f64_to_h"),
    "bfloat16": ("bf16", "uint16_t", WIDENED["bfloat16"][1], "rumus_f64_to_bf"),
}

_TRANSCENDENTAL = ("exp(", "log(")
# elements below which a row op runs on one thread: memory-bound rows, where a second thread pays only on
# large inputs (measured for the norms, as csrc/nn_norm.c's other norms)
_SERIAL_BELOW = {op: 1 << 21 for op in ("layer_norm", "rms_norm", "layer_norm_backward", "rms_norm_backward",
                                         "group_norm", "group_norm_backward")}


def _transcendental(src: str) -> bool:
    return any(f in src for f in _TRANSCENDENTAL)


def _function(fname: str, ctype: str, params: list[str], src: str) -> str:
    """static inline ctype fname(ctype p, ...): `src` rendered over `params`."""
    r = CRenderer("float32" if ctype == "float" else "float64")
    lets, (res, typ) = r.render(src, {p: p for p in params})
    if typ == "c":
        res = r.const(float(res))
    args = ", ".join(f"{ctype} {p}" for p in params) or "void"
    body = [*(f"(void){p};" for p in params),
            *(f"const {ctype if ty == 'T' else 'int'} {n} = {v};" for n, v, ty in lets), f"return ({ctype})({res});"]
    return f"static inline {ctype} {fname}({args}) {{ " + " ".join(body) + " }"


class _Op:
    """The names and element functions of one op's rendering."""

    def __init__(self, name: str, op: RowOp) -> None:
        for p in op.passes:
            if p.reduce not in REDUCTIONS:
                raise ValueError(f"row op {name}: unknown reduction {p.reduce!r}")
        if (len(op.inputs) + len(op.columns) > 4 or len(op.params) > 4 or len(op.column_sums) > 2
                or len(op.row_inputs) > 4 or len(op.row_outputs) > 2):
            raise ValueError(f"row op {name}: at most four operands, four parameters, two column sums, four row "
                             f"inputs and two row outputs")
        if any(p.when and p.reduce != "sum" for p in op.passes):
            raise ValueError(f"row op {name}: only a sum pass may be skipped (Pass.when)")
        if op.per_row and (op.column_sums or op.uses_e()):
            raise ValueError(f"row op {name}: a per-row output names no element and takes no column sums")
        if op.grouped_columns and (op.per_row or "at(" in op.finalize + "".join(p.then for p in op.passes)):
            raise ValueError(f"row op {name}: grouped columns are read per element only")
        self.name, self.op = name, op
        self.values = list(op.row_values)
        self.then = [[n for n, _ in split_lets(p.then)] for p in op.passes]
        self.lets = [n for n, _ in op.lets]
        self.params = [p for p, _ in op.params]
        self.e = op.uses_e()
        self.sums = [src for _, src in op.column_sums]
        self.rins = [nm for nm, _ in op.row_inputs]
        self.index = op.uses_index()
        self.grouped = op.grouped_columns
        self.gathered = 0  # at(...) values rendered so far: their C names are unique in the file
        # float math only where double would cost a libm call per element (exp, log): the rest in double
        self.floaty = any(_transcendental(t) for t in [*(p.element for p in op.passes), op.out])

    def row_names(self, k: int | None) -> list[str]:
        """Per-row values pass k's element sees (k None: the output's)."""
        last = len(self.values) if k is None else k
        out = [*self.params, "n", *self.rins]
        for j in range(last):
            out += [self.values[j], *self.then[j]]
        return out + (self.lets if k is None else [])

    def scope(self, k: int | None) -> list[str]:
        return [*self.op.inputs, *self.op.columns, *self.row_names(k), *(["i"] if self.index else []),
                *(["e"] if k is None and self.e else [])]

    def fn(self, k: int | None, mode: str) -> str:
        return f"rx_{self.name}_{'out' if k is None else f'p{k}'}_{mode}"

    def functions(self) -> list[str]:
        """Element functions: mode d (double, every name a double) and f (float); the column sums' in double."""
        out = []
        for mode, ctype in (("d", "double"), ("f", "float")):
            for k in [*range(len(self.values)), *([] if self.op.per_row else [None])]:
                src = self.op.passes[k].element if k is not None else self.op.out
                out.append(_function(self.fn(k, mode), ctype, self.scope(k), src))
        sum_scope = [*self.op.inputs, *self.op.columns, *self.row_names(None), *(["i"] if self.index else [])]
        for j, src in enumerate(self.sums):
            out.append(_function(f"rx_{self.name}_c{j}_d", "double", sum_scope, src))
        return out

    def col(self, idx: str, lanes: bool = False) -> str:
        """The column operands' index of the row's element `idx` (grouped: its channel's, see head()). lanes:
        the float rows' form, rows below 2^31 elements: idx / S as (idx + 0.5) * (1 / S) through int32,
        which vectorises where an integer division does not (exact: idx + 0.5 is 0.5 / S from a multiple
        of S, far more than the product's rounding for any row below 2^51 elements)."""
        if not self.grouped:
            return idx
        if lanes:
            return f"(g_c0 + (int32_t)(((double)(int32_t)({idx}) + 0.5) * g_rin))"
        return f"(g_c0 + ({idx}) / g_in)"

    def sum_lines(self, operands: dict[str, str], indent: str) -> list[str]:
        """The column sums of element i into the partition's accumulators (acc: one column operand each)."""
        names = [*self.op.inputs, *self.op.columns, *self.row_names(None), *(["i"] if self.index else [])]
        if self.grouped:  # channel by channel (its column read once), each channel's run summed, then added
            operands = {nm: v.replace(self.col("i"), "(g_c0 + ch)").replace(self.col("i", True), "(g_c0 + ch)")
                        for nm, v in operands.items()}
        args = ", ".join(operands.get(nm, "d_" + nm) for nm in names)
        terms = [f"rx_{self.name}_c{j}_d({args})" for j in range(len(self.sums))]
        if self.grouped and terms:  # every sum in one walk of the row: one read of its operands
            init = " ".join(f"double sc{j} = 0.0;" for j in range(len(terms)))
            adds = " ".join(f"sc{j} += {t};" for j, t in enumerate(terms))
            stores = " ".join(f"acc[{j} * g_nc + g_c0 + ch] += sc{j};" for j in range(len(terms)))
            return [f"{indent}for (int64_t ch = 0; ch < n / g_in; ch++) {{ {init} "
                    f"for (i = ch * g_in; i < (ch + 1) * g_in; i++) {{ {adds} }} {stores} }}"]
        return [f"{indent}for (i = 0; i < n; i++) acc[{j} * n + i] += {t};" for j, t in enumerate(terms)]

    def row_result(self, gather: Gather) -> list[str]:
        """A per-row output as d_rowout, in double."""
        return self.scalars(f"rowout = {self.op.out}", self.row_names(None), gather)

    def row_stores(self, gather: Gather, t: str, store: str) -> list[str]:
        """The further per-row outputs, rounded once into row r of rout[k]."""
        lines = []
        for k, (_, src) in enumerate(self.op.row_outputs):
            lines += self.scalars(f"ro{k} = {src}", self.row_names(None), gather)
            lines.append(f"(({t} *)rout[{k}])[r] = ({t}){store}(d_ro{k});")
        return lines

    def zeros(self, zero: str, store: Callable[[str], str], t: str) -> list[str]:
        """The zero_if test: the row's zeros, then return (store(i): element i's store of `zero`)."""
        if not self.op.zero_if:
            return []
        lets, (res, _) = CRenderer("float64").render(self.op.zero_if, {v: f"d_{v}" for v in self.row_names(0)})
        if lets:
            raise ValueError(f"row op {self.name}: zero_if takes no lets")
        body = [f"*(w_zero) = {zero};"] if self.op.per_row else [f"for (int64_t z = 0; z < n; z++) {store('z')};"]
        return [f"if ({res}) {{", *("    " + b for b in body),
                *(f"    (({t} *)rout[{k}])[r] = {zero};" for k in range(len(self.op.row_outputs))), "    return;", "}"]

    def condition(self, k: int) -> str:
        """Pass k's `when` in double over the row values before it ("" for none)."""
        if not self.op.passes[k].when:
            return ""
        lets, (res, _) = CRenderer("float64").render(self.op.passes[k].when, {v: f"d_{v}" for v in self.row_names(k)})
        if lets:
            raise ValueError(f"row op {self.name}: a pass condition takes no lets")
        return res

    def call(self, k: int | None, mode: str, operands: dict[str, str], e: str = "") -> str:
        prefix = "d_" if mode == "d" else "c_"
        args = [operands.get(n, prefix + n) for n in self.scope(k)]
        if e:
            args[-1] = e
        return f"{self.fn(k, mode)}({', '.join(args)})"

    def scalars(self, src: str, env: list[str], gather: Gather) -> list[str]:
        """Lets over row values in double (d_<name>), with their float roundings (c_<name>); `gather`
        renders at(operand, index) as the C load of that element (index an int64_t text)."""
        lines: list[str] = []
        r = CRenderer("float64")
        names = {v: f"d_{v}" for v in env}
        for name, expr in split_lets(src):
            expr = self._gathers(expr, names, gather, lines)
            lets, (res, typ) = r.render(expr, dict(names))
            if lets:
                raise ValueError(f"row op {self.name}: a row-level let takes no lets of its own")
            if typ == "c":
                res = r.const(float(res))
            lines += [f"const double d_{name} = {res};", f"const float c_{name} = (float)d_{name};",
                      f"(void)d_{name};", f"(void)c_{name};"]
            names[name] = f"d_{name}"
        return lines

    def _gathers(self, expr: str, names: dict[str, str], gather: Gather, lines: list[str]) -> str:
        """`expr` with each at(operand, index) replaced by a name bound (in `lines`) to that element, or 0
        where the index is outside the row."""
        op = self

        class _At(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                if not (isinstance(node.func, ast.Name) and node.func.id == "at"):
                    return node
                target, index = node.args
                if not (isinstance(target, ast.Name) and target.id in (*op.op.inputs, *op.op.columns)):
                    raise ValueError(f"row op {op.name}: at() reads an input or column operand, got "
                                     f"{ast.unparse(target)}")
                lets, (idx, _) = CRenderer("float64").render(ast.unparse(index), dict(names))
                if lets:
                    raise ValueError(f"row op {op.name}: at()'s index takes no lets")
                op.gathered += 1
                g = f"at{op.gathered}"
                lines.append(f"const double d_{g} = ({idx} >= 0.0 && {idx} < d_n) ? "
                             f"{gather(target.id, f'(int64_t)({idx})')} : 0.0;")
                names[g] = f"d_{g}"
                return ast.Name(g, ast.Load())

        if "at(" not in expr:
            return expr
        return ast.unparse(_At().visit(ast.parse(expr, mode="eval")))

    def head(self, t: str = "float", load: str = "RUMUS_AS_IS") -> list[str]:
        """The parameters and the row length as row values."""
        lines = []
        for i, p in enumerate(self.params):
            lines += [f"const double d_{p} = prm[{i}];", f"const float c_{p} = (float)d_{p};", f"(void)d_{p};",
                      f"(void)c_{p};"]
        lines += ["const double d_n = (double)n;", "const float c_n = (float)n;", "(void)d_n;", "(void)c_n;"]
        if self.grouped:  # row r's first channel g_c0, S = g_in elements a channel, g_nc channels in all
            lines += ["const int64_t g_in = (int64_t)prm[5], g_c0 = (r % (int64_t)prm[4]) * (n / g_in);",
                      "const int64_t g_nc = (int64_t)prm[4] * (n / g_in);", "const double g_rin = 1.0 / (double)g_in;",
                      "(void)g_c0;", "(void)g_nc;", "(void)g_rin;"]
        for k, nm in enumerate(self.rins):
            kind = self.op.row_inputs[k][1]
            value = f"(double)((const int64_t *)rin[{k}])[r]" if kind == "int64" else \
                f"(double){load}(((const {t} *)rin[{k}])[r])"
            lines += [f"const double d_{nm} = {value};", f"const float c_{nm} = (float)d_{nm};", f"(void)d_{nm};",
                      f"(void)c_{nm};"]
        return lines


_ROW_ARGS = ("char *w, const char *const *in, int64_t n, int64_t so, int64_t si, const double *prm, double *acc, "
             "const char *const *rin, char *const *rout, int64_t r")
_ROW_PASS = "prm, acc, rin, rout, r"
Gather = Callable[[str, str], str]


def _generic(o: _Op, sfx: str, t: str, load: str, store: str) -> str:
    """A row in double: strided, any stored type (LD widens, ST rounds once)."""
    ld = {n: f"(double){load}(*(const {t} *)(p{i} + i * si))" for i, n in enumerate(o.op.inputs)}
    ld.update({n: f"(double){load}(*(const {t} *)(p{len(o.op.inputs) + i} + {o.col('i')} * (int64_t)sizeof({t})))"
               for i, n in enumerate(o.op.columns)})
    ld["i"] = "(double)i"
    slot = {n: k for k, n in enumerate((*o.op.inputs, *o.op.columns))}

    def gather(name: str, idx: str) -> str:
        step = "si" if name in o.op.inputs else f"(int64_t)sizeof({t})"
        return f"(double){load}(*(const {t} *)(p{slot[name]} + {idx} * {step}))"
    lines = [f"static void rg_{o.name}_{sfx}({_ROW_ARGS}) {{", "    (void)prm;", "    (void)acc;", "    (void)rin;",
             "    (void)rout;", "    (void)r;",
             *(f"    const char *p{i} = in[{i}];" for i in range(len(o.op.inputs) + len(o.op.columns))),
             *("    " + s for s in o.head(t, load))]
    lines += ["    " + s.replace("*(w_zero)", f"*({t} *)w")
              for s in o.zeros(f"({t}){store}(0.0)", lambda z: f"*({t} *)(w + {z} * so) = ({t}){store}(0.0)", t)]
    for k, p in enumerate(o.op.passes):
        v = f"d_{p.value}"
        lines.append(f"    double {v} = {'-INFINITY' if p.reduce == 'max' else '0.0'};")
        el = o.call(k, "d", ld)
        if p.reduce == "max":
            lines.append(f"    for (int64_t i = 0; i < n; i++) {{ const double v = {el}; "
                         f"if (v > {v} || v != v) {v} = v; }}")
        else:
            cond = o.condition(k)
            lines.append(f"    {f'if ({cond}) ' if cond else ''}for (int64_t i = 0; i < n; i++) {v} += {el};")
        lines.append(f"    const float c_{p.value} = (float){v};")
        lines.append(f"    (void)c_{p.value};")
        lines += ["    " + s for s in o.scalars(p.then, o.row_names(k + 1), gather)]
    lines += ["    " + s for s in o.scalars(o.op.finalize, o.row_names(len(o.values)), gather)]
    lines += ["    " + s for s in o.row_stores(gather, t, store)]
    if o.op.per_row:
        lines += ["    " + s for s in o.row_result(gather)]
        lines += [f"    *({t} *)w = ({t}){store}(d_rowout);", "}"]
        return "\n".join(lines)
    e = o.call(len(o.values) - 1, "d", ld) if o.e else ""
    result = f"({t}){store}({o.call(None, 'd', ld, e)})"
    lines.append(f"    for (int64_t i = 0; i < n; i++) *({t} *)(w + i * so) = {result};")
    if o.sums:
        lines += ["    {", "        int64_t i;", *o.sum_lines(ld, "        "), "    }"]
    lines.append("}")
    return "\n".join(lines)


def _max_lanes(v: str, q: str, q1: str, ctype: str) -> list[str]:
    pick = "lm[j] = (q > lm[j] || q != q) ? q : lm[j];"
    return [f"    {ctype} c_{v};", "    {",
            f"        {ctype} lm[RUMUS_ROW_LANES];",
            "        for (int j = 0; j < RUMUS_ROW_LANES; j++) lm[j] = -INFINITY;",
            "        for (i = 0; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {",
            "            _Pragma(\"GCC unroll 1\") for (int j = 0; j < RUMUS_ROW_LANES; j++) {",
            f"                const {ctype} q = {q};", f"                {pick}",
            "            }", "        }",
            f"        for (int j = 0; i < n; i++, j++) {{ const {ctype} q = {q1}; {pick} }}",
            f"        c_{v} = lm[0];",
            f"        for (int j = 1; j < RUMUS_ROW_LANES; j++) c_{v} = (lm[j] > c_{v} || lm[j] != lm[j]) "
            f"? lm[j] : c_{v};",
            "    }"]


def _fast(o: _Op, strided: bool = False) -> str:
    """A contiguous float32 row: lanes gcc vectorises (see the module docstring). `strided`: the same float
    math over a row whose inputs are si bytes apart (rfs_<op>; per-row outputs only, which keep nothing in
    an output row), where rows in double would pay a libm call per element."""
    ins, cols = o.op.inputs, o.op.columns
    if strided:
        at = {**{n: f"*(const float *)({n} + (i + j) * si)" for n in ins}, **{n: f"{n}[i + j]" for n in cols}}
        at1 = {**{n: f"*(const float *)({n} + i * si)" for n in ins}, **{n: f"{n}[i]" for n in cols}}
    else:
        at = {**{n: f"{n}[i + j]" for n in ins}, **{n: f"{n}[{o.col('i + j', True)}]" for n in cols}}
        at1 = {**{n: f"{n}[i]" for n in ins}, **{n: f"{n}[{o.col('i', True)}]" for n in cols}}
    dat = {n: f"(double){v}" for n, v in at.items()}
    dat1 = {n: f"(double){v}" for n, v in at1.items()}
    # the index through int32 (n <= 2^24 here): int64 -> float conversions do not vectorise before AVX-512DQ
    at.update(i="(float)(int32_t)(i + j)")
    at1.update(i="(float)(int32_t)i")
    dat.update(i="(double)(int32_t)(i + j)")
    dat1.update(i="(double)(int32_t)i")

    def gather(name: str, idx: str) -> str:
        if strided and name in ins:
            return f"(double)*(const float *)({name} + {idx} * si)"
        return f"(double){name}[{idx}]"
    pointers = [*(f"    const char *{n} = in[{i}];" if strided else f"    const float *{n} = (const float *)in[{i}];"
                  for i, n in enumerate(ins)),
                *(f"    const float *{n} = (const float *)in[{len(ins) + i}];" for i, n in enumerate(cols))]
    lines = [f"RUMUS_CLONES_WIDE static void {'rfs' if strided else 'rf'}_{o.name}(float *o, const char *const *in, "
             f"int64_t n, {'int64_t si, ' if strided else ''}const double *prm, double *acc, const char *const *rin, "
             "char *const *rout, int64_t r) {", "    (void)prm;", "    (void)acc;", "    (void)rin;", "    (void)rout;",
             "    (void)r;", *pointers,
             "    int64_t i;", *("    " + s for s in o.head())]
    lines += ["    " + s.replace("*(w_zero)", "*o") for s in o.zeros("0.0f", lambda z: f"o[{z}] = 0.0f", "float")]
    last = len(o.values) - 1
    stashed = False
    for k, p in enumerate(o.op.passes):
        v = p.value
        if p.reduce == "max":
            if o.floaty:
                lines += _max_lanes(v, o.call(k, "f", at), o.call(k, "f", at1), "float")
                lines += [f"    const double d_{v} = (double)c_{v};", f"    (void)d_{v};"]
            else:
                lines += [s.replace(f"c_{v}", f"d_{v}") for s in _max_lanes(v, o.call(k, "d", dat),
                                                                              o.call(k, "d", dat1), "double")]
                lines += [f"    const float c_{v} = (float)d_{v};", f"    (void)c_{v};"]
        else:
            # float, kept in the output row, where double would cost a libm call per element or the output
            # names it; then the lanes sum the row (faster than summing as it is computed)
            kept = (o.floaty and not o.op.per_row and not p.when
                    and ((o.e and k == last) or _transcendental(p.element)))
            stashed = kept and k == last
            if kept:
                lines.append(f"    for (i = 0; i < n; i++) o[i] = {o.call(k, 'f', at1)};")
                term, term1 = "(double)o[i + j]", "(double)o[i]"
            elif o.floaty and _transcendental(p.element):  # no output row to keep it in: summed as computed
                term, term1 = f"(double){o.call(k, 'f', at)}", f"(double){o.call(k, 'f', at1)}"
            else:
                term, term1 = o.call(k, "d", dat), o.call(k, "d", dat1)
            cond = o.condition(k)
            lines += [f"    double d_{v} = 0.0;", f"    if ({cond}) {{" if cond else "    {",
                      "        double ls[RUMUS_ROW_LANES];",
                      "        for (int j = 0; j < RUMUS_ROW_LANES; j++) ls[j] = 0.0;",
                      "        for (i = 0; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {",
                      "            _Pragma(\"GCC unroll 1\") for (int j = 0; j < RUMUS_ROW_LANES; j++) "
                      f"ls[j] += {term};",
                      "        }",
                      f"        for (int j = 0; i < n; i++, j++) ls[j] += {term1};",
                      f"        for (int j = 0; j < RUMUS_ROW_LANES; j++) d_{v} += ls[j];",
                      "    }", f"    const float c_{v} = (float)d_{v};", f"    (void)c_{v};"]
        lines += ["    " + s for s in o.scalars(p.then, o.row_names(k + 1), gather)]
    lines += ["    " + s for s in o.scalars(o.op.finalize, o.row_names(len(o.values)), gather)]
    lines += ["    " + s for s in o.row_stores(gather, "float", "RUMUS_AS_IS")]
    if o.op.per_row:
        lines += ["    " + s for s in o.row_result(gather)]
        lines += ["    *o = (float)d_rowout;", "}"]
        return "\n".join(lines)
    if o.floaty:
        e = ("o[i]" if stashed else o.call(last, "f", at1)) if o.e else ""
        lines.append(f"    for (i = 0; i < n; i++) o[i] = {o.call(None, 'f', at1, e)};")
    else:
        e = o.call(last, "d", dat1) if o.e else ""
        lines.append(f"    for (i = 0; i < n; i++) o[i] = (float){o.call(None, 'd', dat1, e)};")
    lines += o.sum_lines(dat1, "    ")
    lines.append("}")
    return "\n".join(lines)


def _blocks(op: RowOp) -> bool:
    """Whether a per-row op gets the block form: one input and no columns, row operands, gathers or skips."""
    return (op.per_row and len(op.inputs) == 1 and not op.columns and not op.row_inputs and not op.row_outputs
            and not op.zero_if and not op.uses_index() and not any(p.when for p in op.passes)
            and "at(" not in op.finalize + "".join(p.then for p in op.passes))


def _block(o: _Op) -> str:
    """float32 rows along a strided dim, nb (at most RUMUS_ROW_LANES) of them side by side in memory (the
    kept inner dim contiguous): each lane one row, the rows walked together, so the loads are contiguous
    and the lanes vectorise (a max pass's NaN rule and the float/double split as the contiguous form's).
    Row b's element i is at in[0] + 4 b + i si, its output at w + b os."""
    x = o.op.inputs[0]
    lanes = "RUMUS_ROW_LANES"
    lines = [f"RUMUS_CLONES_WIDE static void rb_{o.name}(char *w, int64_t os, const char *const *in, int64_t n, "
             "int64_t si, int64_t nb, const double *prm) {", "    (void)prm;", "    int64_t i;",
             *("    " + s for s in o.head())]
    arrays: list[str] = []  # row values so far, as per-lane arrays L_<name> (double) and F_<name> (float)

    def lane_env() -> list[str]:
        return [f"const double d_{v} = L_{v}[b]; const float c_{v} = F_{v}[b]; (void)d_{v}; (void)c_{v};"
                for v in arrays]

    def keep(names: list[str]) -> list[str]:
        out = []
        for v in names:
            out += [f"L_{v}[b] = d_{v};", f"F_{v}[b] = c_{v};"]
        return out

    for k, p in enumerate(o.op.passes):
        v = p.value
        fl = o.floaty
        ops_f = {x: "xi[b]", **{a: f"F_{a}[b]" for a in arrays}}
        ops_d = {x: "(double)xi[b]", **{a: f"L_{a}[b]" for a in arrays}}
        el = o.call(k, "f", ops_f) if fl else o.call(k, "d", ops_d)
        if p.reduce == "max":
            t = "float" if fl else "double"
            lines += [f"    {t} lm{k}[{lanes}];", f"    for (int b = 0; b < nb; b++) lm{k}[b] = -INFINITY;",
                      "    for (i = 0; i < n; i++) {", "        const float *xi = (const float *)(in[0] + i * si);",
                      f"        for (int b = 0; b < nb; b++) {{ const {t} q = {el}; "
                      f"lm{k}[b] = (q > lm{k}[b] || q != q) ? q : lm{k}[b]; }}", "    }"]
            first = f"const double d_{v} = (double)lm{k}[b]; const float c_{v} = (float)lm{k}[b];"
        else:
            term = f"(double){el}" if fl and _transcendental(p.element) else (el if not fl else o.call(k, "d", ops_d))
            lines += [f"    double ls{k}[{lanes}];", f"    for (int b = 0; b < nb; b++) ls{k}[b] = 0.0;",
                      "    for (i = 0; i < n; i++) {", "        const float *xi = (const float *)(in[0] + i * si);",
                      f"        for (int b = 0; b < nb; b++) ls{k}[b] += {term};", "    }"]
            first = f"const double d_{v} = ls{k}[b]; const float c_{v} = (float)d_{v};"
        then = [n for n, _ in split_lets(p.then)]
        lines += [f"    double L_{a}[{lanes}];" for a in [v, *then]]
        lines += [f"    float F_{a}[{lanes}];" for a in [v, *then]]
        lines += ["    for (int b = 0; b < nb; b++) {", *("        " + s for s in lane_env()), "        " + first,
                  *("        " + s for s in o.scalars(p.then, o.row_names(k + 1), _no_gather)),
                  *("        " + s for s in keep([v, *then])), "    }"]
        arrays += [v, *then]
    lines += ["    for (int b = 0; b < nb; b++) {", *("        " + s for s in lane_env()),
              *("        " + s for s in o.scalars(o.op.finalize, o.row_names(len(o.values)), _no_gather)),
              *("        " + s for s in o.row_result(_no_gather)),
              "        *(float *)(w + b * os) = (float)d_rowout;", "    }", "}"]
    return "\n".join(lines)


def _no_gather(name: str, idx: str) -> str:
    raise ValueError("the block form reads no gathered elements")


def _grain(op: RowOp) -> str:
    """Rows with an exp or log per element split over threads sooner (csrc/internal/rumus.h's classes)."""
    return "RUMUS_GRAIN_ROWS" if any(_transcendental(t) for t in [*(p.element for p in op.passes), op.out]) else "0"


def render_rows() -> str:
    """The C text of every row op's element functions, row functions and the table."""
    lines = ['#include "internal/row_loops.h"', ""]
    for sfx, t, _, store in ROW_DTYPES.values():  # a column sum's rounding into its stored type
        lines.append(f"static void rs_{sfx}(char *d, int64_t j, double v) {{ (({t} *)d)[j] = ({t}){store}(v); }}")
    entries = []
    for name, op in ROW_OPS.items():
        o = _Op(name, op)
        lines += o.functions()
        lines.append(_fast(o))
        if op.per_row and not o.index:
            lines.append(_fast(o, strided=True))
        if _blocks(op):
            lines.append(_block(o))
        for dt, (sfx, t, load, store) in ROW_DTYPES.items():
            lines.append(_generic(o, sfx, t, load, store))
            contiguous = "si == 4" if op.per_row else "so == 4 && si == 4"
            if o.index:  # the float lanes count the index in float: exact below 2^24
                contiguous += " && n <= 16777216"
            elif o.grouped:  # the float lanes find a channel through int32 (_Op.col)
                contiguous += " && n <= 2147483647"
            fast = (f"    if ({contiguous}) {{ rf_{name}((float *)w, in, n, {_ROW_PASS}); return; }}\n"
                    if dt == "float32" else "")
            if dt == "float32" and op.per_row and not o.index:
                fast += f"    rfs_{name}((float *)w, in, n, si, {_ROW_PASS});\n    return;\n"
            lines.append(f"static void row_{name}_{sfx}({_ROW_ARGS}) {{\n{fast}"
                         f"    rg_{name}_{sfx}(w, in, n, so, si, {_ROW_PASS});\n}}")
            entries.append(f'    {{"{name}_{sfx}", row_{name}_{sfx}, sizeof({t}), {len(op.inputs)}, {len(op.columns)}, '
                           f'{_grain(op)}, {_SERIAL_BELOW.get(name, 0)}, {len(op.column_sums)}, rs_{sfx}, '
                           f'{f"rb_{name}" if _blocks(op) and dt == "float32" else "NULL"}, '
                           f'{int(op.grouped_columns)}}},')
    lines.append("static const rumus_row_entry ROW_TABLE[] = {\n" + "\n".join(entries) + "\n};")
    lines.append(_RUNNERS)
    return "\n".join(lines) + "\n"


_RUNNERS = """
int64_t rumus_rows_find(const char *name) { return RUMUS_FIND_IN(ROW_TABLE, name); }

void rumus_rows_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                    int64_t yo, char *c0, char *c1, double p0, double p1) {
    char *const ptrs[RUMUS_ROW_PTRS] = {c0, c1};
    const double prm[6] = {p0, p1, 0.0, 0.0, 1.0, 1.0};
    rumus_rows_exec(&ROW_TABLE[loop], meta, o, oo, x, xo, y, yo, ptrs, prm);
}

void rumus_rows_run_ext(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                        int64_t yo, char *const *ptrs, const double *prm) {
    rumus_rows_exec(&ROW_TABLE[loop], meta, o, oo, x, xo, y, yo, ptrs, prm);
}
"""

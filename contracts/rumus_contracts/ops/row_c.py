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
csrc/internal/row_loops.h adds up in partition order and rounds once.
Stdlib only: the build imports this without numpy.
"""

from __future__ import annotations

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
_SERIAL_BELOW = {op: 1 << 21 for op in ("layer_norm", "rms_norm", "layer_norm_backward", "rms_norm_backward")}


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
        if len(op.inputs) + len(op.columns) > 4 or len(op.params) > 2 or len(op.column_sums) > 2:
            raise ValueError(f"row op {name}: at most four operands, two parameters and two column sums")
        if op.per_row and (op.column_sums or op.uses_e()):
            raise ValueError(f"row op {name}: a per-row output names no element and takes no column sums")
        self.name, self.op = name, op
        self.values = list(op.row_values)
        self.then = [[n for n, _ in split_lets(p.then)] for p in op.passes]
        self.lets = [n for n, _ in op.lets]
        self.params = [p for p, _ in op.params]
        self.e = op.uses_e()
        self.sums = [src for _, src in op.column_sums]
        # float math only where double would cost a libm call per element (exp, log): the rest in double
        self.floaty = any(_transcendental(t) for t in [*(p.element for p in op.passes), op.out])

    def row_names(self, k: int | None) -> list[str]:
        """Per-row values pass k's element sees (k None: the output's)."""
        last = len(self.values) if k is None else k
        out = [*self.params, "n"]
        for j in range(last):
            out += [self.values[j], *self.then[j]]
        return out + (self.lets if k is None else [])

    def scope(self, k: int | None) -> list[str]:
        return [*self.op.inputs, *self.op.columns, *self.row_names(k), *(["e"] if k is None and self.e else [])]

    def fn(self, k: int | None, mode: str) -> str:
        return f"rx_{self.name}_{'out' if k is None else f'p{k}'}_{mode}"

    def functions(self) -> list[str]:
        """Element functions: mode d (double, every name a double) and f (float); the column sums' in double."""
        out = []
        for mode, ctype in (("d", "double"), ("f", "float")):
            for k in [*range(len(self.values)), *([] if self.op.per_row else [None])]:
                src = self.op.passes[k].element if k is not None else self.op.out
                out.append(_function(self.fn(k, mode), ctype, self.scope(k), src))
        sum_scope = [*self.op.inputs, *self.op.columns, *self.row_names(None)]
        for j, src in enumerate(self.sums):
            out.append(_function(f"rx_{self.name}_c{j}_d", "double", sum_scope, src))
        return out

    def sum_lines(self, operands: dict[str, str], indent: str) -> list[str]:
        """The column sums of element i into the partition's accumulators (acc: one row each)."""
        lines = []
        names = [*self.op.inputs, *self.op.columns, *self.row_names(None)]
        for j in range(len(self.sums)):
            args = ", ".join(operands.get(nm, "d_" + nm) for nm in names)
            lines.append(f"{indent}for (i = 0; i < n; i++) acc[{j} * n + i] += rx_{self.name}_c{j}_d({args});")
        return lines

    def row_result(self) -> list[str]:
        """A per-row output as d_rowout, in double."""
        return self.scalars(f"rowout = {self.op.out}", self.row_names(None))

    def call(self, k: int | None, mode: str, operands: dict[str, str], e: str = "") -> str:
        prefix = "d_" if mode == "d" else "c_"
        args = [operands.get(n, prefix + n) for n in self.scope(k)]
        if e:
            args[-1] = e
        return f"{self.fn(k, mode)}({', '.join(args)})"

    def scalars(self, src: str, env: list[str]) -> list[str]:
        """Lets over row values in double (d_<name>), with their float roundings (c_<name>)."""
        lines = []
        r = CRenderer("float64")
        names = {v: f"d_{v}" for v in env}
        for name, expr in split_lets(src):
            lets, (res, typ) = r.render(expr, dict(names))
            if lets:
                raise ValueError(f"row op {self.name}: a row-level let takes no lets of its own")
            if typ == "c":
                res = r.const(float(res))
            lines += [f"const double d_{name} = {res};", f"const float c_{name} = (float)d_{name};",
                      f"(void)d_{name};", f"(void)c_{name};"]
            names[name] = f"d_{name}"
        return lines

    def head(self) -> list[str]:
        """The parameters and the row length as row values."""
        lines = []
        for i, p in enumerate(self.params):
            lines += [f"const double d_{p} = prm[{i}];", f"const float c_{p} = (float)d_{p};", f"(void)d_{p};",
                      f"(void)c_{p};"]
        return lines + ["const double d_n = (double)n;", "const float c_n = (float)n;", "(void)d_n;", "(void)c_n;"]


_ROW_ARGS = "char *w, const char *const *in, int64_t n, int64_t so, int64_t si, const double *prm, double *acc"


def _generic(o: _Op, sfx: str, t: str, load: str, store: str) -> str:
    """A row in double: strided, any stored type (LD widens, ST rounds once)."""
    ld = {n: f"(double){load}(*(const {t} *)(p{i} + i * si))" for i, n in enumerate(o.op.inputs)}
    ld.update({n: f"(double){load}(*(const {t} *)(p{len(o.op.inputs) + i} + i * (int64_t)sizeof({t})))"
               for i, n in enumerate(o.op.columns)})
    lines = [f"static void rg_{o.name}_{sfx}({_ROW_ARGS}) {{", "    (void)prm;", "    (void)acc;",
             *(f"    const char *p{i} = in[{i}];" for i in range(len(o.op.inputs) + len(o.op.columns))),
             *("    " + s for s in o.head())]
    for k, p in enumerate(o.op.passes):
        v = f"d_{p.value}"
        lines.append(f"    double {v} = {'-INFINITY' if p.reduce == 'max' else '0.0'};")
        el = o.call(k, "d", ld)
        if p.reduce == "max":
            lines.append(f"    for (int64_t i = 0; i < n; i++) {{ const double v = {el}; "
                         f"if (v > {v} || v != v) {v} = v; }}")
        else:
            lines.append(f"    for (int64_t i = 0; i < n; i++) {v} += {el};")
        lines.append(f"    const float c_{p.value} = (float){v};")
        lines.append(f"    (void)c_{p.value};")
        lines += ["    " + s for s in o.scalars(p.then, o.row_names(k + 1))]
    lines += ["    " + s for s in o.scalars(o.op.finalize, o.row_names(len(o.values)))]
    if o.op.per_row:
        lines += ["    " + s for s in o.row_result()]
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
        at = {n: f"{n}[i + j]" for n in (*ins, *cols)}
        at1 = {n: f"{n}[i]" for n in (*ins, *cols)}
    dat = {n: f"(double){v}" for n, v in at.items()}
    dat1 = {n: f"(double){v}" for n, v in at1.items()}
    pointers = [*(f"    const char *{n} = in[{i}];" if strided else f"    const float *{n} = (const float *)in[{i}];"
                  for i, n in enumerate(ins)),
                *(f"    const float *{n} = (const float *)in[{len(ins) + i}];" for i, n in enumerate(cols))]
    lines = [f"RUMUS_CLONES_WIDE static void {'rfs' if strided else 'rf'}_{o.name}(float *o, const char *const *in, "
             f"int64_t n, {'int64_t si, ' if strided else ''}const double *prm, double *acc) {{", "    (void)prm;",
             "    (void)acc;", *pointers, "    int64_t i;", *("    " + s for s in o.head())]
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
            kept = o.floaty and not o.op.per_row and ((o.e and k == last) or _transcendental(p.element))
            stashed = kept and k == last
            if kept:
                lines.append(f"    for (i = 0; i < n; i++) o[i] = {o.call(k, 'f', at1)};")
                term, term1 = "(double)o[i + j]", "(double)o[i]"
            elif o.floaty and _transcendental(p.element):  # no output row to keep it in: summed as computed
                term, term1 = f"(double){o.call(k, 'f', at)}", f"(double){o.call(k, 'f', at1)}"
            else:
                term, term1 = o.call(k, "d", dat), o.call(k, "d", dat1)
            lines += [f"    double d_{v} = 0.0;", "    {",
                      "        double ls[RUMUS_ROW_LANES];",
                      "        for (int j = 0; j < RUMUS_ROW_LANES; j++) ls[j] = 0.0;",
                      "        for (i = 0; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {",
                      "            _Pragma(\"GCC unroll 1\") for (int j = 0; j < RUMUS_ROW_LANES; j++) "
                      f"ls[j] += {term};",
                      "        }",
                      f"        for (int j = 0; i < n; i++, j++) ls[j] += {term1};",
                      f"        for (int j = 0; j < RUMUS_ROW_LANES; j++) d_{v} += ls[j];",
                      "    }", f"    const float c_{v} = (float)d_{v};", f"    (void)c_{v};"]
        lines += ["    " + s for s in o.scalars(p.then, o.row_names(k + 1))]
    lines += ["    " + s for s in o.scalars(o.op.finalize, o.row_names(len(o.values)))]
    if o.op.per_row:
        lines += ["    " + s for s in o.row_result()]
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
        if op.per_row:
            lines.append(_fast(o, strided=True))
        for dt, (sfx, t, load, store) in ROW_DTYPES.items():
            lines.append(_generic(o, sfx, t, load, store))
            contiguous = "si == 4" if op.per_row else "so == 4 && si == 4"
            fast = (f"    if ({contiguous}) {{ rf_{name}((float *)w, in, n, prm, acc); return; }}\n"
                    if dt == "float32" else "")
            if dt == "float32" and op.per_row:
                fast += f"    rfs_{name}((float *)w, in, n, si, prm, acc);\n    return;\n"
            lines.append(f"static void row_{name}_{sfx}({_ROW_ARGS}) {{\n{fast}"
                         f"    rg_{name}_{sfx}(w, in, n, so, si, prm, acc);\n}}")
            entries.append(f'    {{"{name}_{sfx}", row_{name}_{sfx}, sizeof({t}), {len(op.inputs)}, {len(op.columns)}, '
                           f'{_grain(op)}, {_SERIAL_BELOW.get(name, 0)}, {len(op.column_sums)}, rs_{sfx}}},')
    lines.append("static const rumus_row_entry ROW_TABLE[] = {\n" + "\n".join(entries) + "\n};")
    lines.append(_RUNNERS)
    return "\n".join(lines) + "\n"


_RUNNERS = """
int64_t rumus_rows_find(const char *name) { return RUMUS_FIND_IN(ROW_TABLE, name); }

void rumus_rows_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                    int64_t yo, char *c0, char *c1, double p0, double p1) {
    rumus_rows_exec(&ROW_TABLE[loop], meta, o, oo, x, xo, y, yo, c0, c1, NULL, NULL, p0, p1);
}

void rumus_rows_run_sums(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                         int64_t yo, char *c0, char *c1, char *s0, char *s1, double p0, double p1) {
    rumus_rows_exec(&ROW_TABLE[loop], meta, o, oo, x, xo, y, yo, c0, c1, s0, s1, p0, p1);
}
"""

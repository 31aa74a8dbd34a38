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
The finalize step runs in double; the float form rounds its values to float once.
Stdlib only: the build imports this without numpy.
"""

from __future__ import annotations

from .expr_c import WIDENED, CRenderer
from .row_ops import REDUCTIONS, ROW_OPS, RowOp

# dtype: (C suffix, stored C type, load to double, store from double)
ROW_DTYPES: dict[str, tuple[str, str, str, str]] = {
    "float32": ("f32", "float", "RUMUS_AS_IS", "RUMUS_AS_IS"),
    "float64": ("f64", "double", "RUMUS_AS_IS", "RUMUS_AS_IS"),
    "float16": ("f16", "uint16_t", WIDENED["float16"][1], "rumus_f64_to_h"),
    "bfloat16": ("bf16", "uint16_t", WIDENED["bfloat16"][1], "rumus_f64_to_bf"),
}

_TRANSCENDENTAL = ("exp(", "log(")


def _function(fname: str, ctype: str, params: list[str], src: str, names: dict[str, str]) -> str:
    """static inline ctype fname(ctype p, ...): `src` rendered over `params` (named by `names`)."""
    r = CRenderer("float32" if ctype == "float" else "float64")
    lets, (res, typ) = r.render(src, names)
    if typ == "c":
        res = r.const(float(res))
    args = ", ".join(f"{ctype} {names[p]}" for p in params) or "void"
    body = [*(f"(void){names[p]};" for p in params),
            *(f"const {ctype if ty == 'T' else 'int'} {n} = {v};" for n, v, ty in lets), f"return ({ctype})({res});"]
    return f"static inline {ctype} {fname}({args}) {{ " + " ".join(body) + " }"


class _Op:
    """The names and element functions of one op's rendering."""

    def __init__(self, name: str, op: RowOp) -> None:
        for p in op.passes:
            if p.reduce not in REDUCTIONS:
                raise ValueError(f"row op {name}: unknown reduction {p.reduce!r}")
        self.name, self.op = name, op
        self.values = list(op.row_values)
        self.lets = [n for n, _ in op.lets]
        self.e = op.uses_e()

    def scope(self, k: int | None) -> list[str]:
        """The names pass k's element sees (k None: the output's)."""
        if k is not None:
            return [*self.op.inputs, *self.values[:k]]
        return [*self.op.inputs, *self.values, *self.lets, *(["e"] if self.e else [])]

    def fn(self, k: int | None, mode: str) -> str:
        return f"rx_{self.name}_{'out' if k is None else f'p{k}'}_{mode}"

    def functions(self) -> list[str]:
        """Element functions: mode d (double, every name a double) and f (float: inputs, row values as float)."""
        out = []
        for mode, ctype in (("d", "double"), ("f", "float")):
            for k in [*range(len(self.values)), None]:
                params = self.scope(k)
                src = self.op.passes[k].element if k is not None else self.op.out
                out.append(_function(self.fn(k, mode), ctype, params, src, {p: p for p in params}))
        return out

    def call(self, k: int | None, mode: str, inputs: dict[str, str], e: str = "") -> str:
        prefix = "d_" if mode == "d" else "c_"
        args = [inputs.get(n, prefix + n) for n in self.scope(k)]
        if e:
            args[-1] = e
        return f"{self.fn(k, mode)}({', '.join(args)})"

    def finalize(self) -> list[str]:
        """The finalize lets in double (d_<name>) and their float roundings (c_<name>)."""
        lines = []
        r = CRenderer("float64")
        env = {v: f"d_{v}" for v in self.values}
        for name, expr in self.op.lets:
            lets, (res, typ) = r.render(expr, dict(env))
            if lets:
                raise ValueError(f"row op {self.name}: a finalize expression takes no lets of its own")
            if typ == "c":
                res = r.const(float(res))
            lines += [f"const double d_{name} = {res};", f"const float c_{name} = (float)d_{name};",
                      f"(void)c_{name};"]
            env[name] = f"d_{name}"
        return lines


def _generic(o: _Op, sfx: str, t: str, load: str, store: str) -> str:
    """A row in double: strided, any stored type (LD widens, ST rounds once)."""
    ld = {n: f"(double){load}(*(const {t} *)(p{i} + i * si))" for i, n in enumerate(o.op.inputs)}
    lines = [f"static void rg_{o.name}_{sfx}(char *w, const char *const *in, int64_t n, int64_t so, int64_t si) {{",
             *(f"    const char *p{i} = in[{i}];" for i in range(len(o.op.inputs)))]
    for k, p in enumerate(o.op.passes):
        v = f"d_{p.value}"
        lines.append(f"    double {v} = {'-INFINITY' if p.reduce == 'max' else '0.0'};")
        el = o.call(k, "d", ld)
        if p.reduce == "max":
            lines.append(f"    for (int64_t i = 0; i < n; i++) {{ const double v = {el}; "
                         f"if (v > {v} || v != v) {v} = v; }}")
        else:
            lines.append(f"    for (int64_t i = 0; i < n; i++) {v} += {el};")
    lines += ["    " + s for s in o.finalize()]
    e = o.call(len(o.values) - 1, "d", ld) if o.e else ""
    result = f"({t}){store}({o.call(None, 'd', ld, e)})"
    lines.append(f"    for (int64_t i = 0; i < n; i++) *({t} *)(w + i * so) = {result};")
    lines.append("}")
    return "\n".join(lines)


def _fast(o: _Op) -> str:
    """A contiguous float32 row: lanes gcc vectorises (see the module docstring)."""
    ins = o.op.inputs
    at = {n: f"{n}[i + j]" for n in ins}
    at1 = {n: f"{n}[i]" for n in ins}
    lines = ["RUMUS_CLONES_WIDE static void rf_" + o.name + "(float *o, const char *const *in, int64_t n) {",
             *(f"    const float *{n} = (const float *)in[{i}];" for i, n in enumerate(ins)),
             "    int64_t i;"]
    last = len(o.values) - 1
    stashed = False
    for k, p in enumerate(o.op.passes):
        v = p.value
        if p.reduce == "max":
            pick = "lm[j] = (q > lm[j] || q != q) ? q : lm[j];"
            lines += [f"    float c_{v};", "    {",
                      "        float lm[RUMUS_ROW_LANES];",
                      "        for (int j = 0; j < RUMUS_ROW_LANES; j++) lm[j] = -INFINITY;",
                      "        for (i = 0; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {",
                      "            _Pragma(\"GCC unroll 1\") for (int j = 0; j < RUMUS_ROW_LANES; j++) {",
                      f"                const float q = {o.call(k, 'f', at)};", f"                {pick}",
                      "            }", "        }",
                      f"        for (int j = 0; i < n; i++, j++) {{ const float q = {o.call(k, 'f', at1)}; {pick} }}",
                      f"        c_{v} = lm[0];",
                      f"        for (int j = 1; j < RUMUS_ROW_LANES; j++) c_{v} = (lm[j] > c_{v} || lm[j] != lm[j]) "
                      f"? lm[j] : c_{v};",
                      "    }", f"    const double d_{v} = (double)c_{v};", f"    (void)d_{v};"]
            continue
        # float, kept in the output row, where double would cost a libm call per element or the output
        # names it; then the lanes sum the row (faster than summing as it is computed)
        kept = (o.e and k == last) or _transcendental(p.element)
        stashed = kept and k == last
        if kept:
            lines.append(f"    for (i = 0; i < n; i++) o[i] = {o.call(k, 'f', at1)};")
            term, term1 = "(double)o[i + j]", "(double)o[i]"
        else:
            dat = {n: f"(double){n}[i + j]" for n in ins}
            dat1 = {n: f"(double){n}[i]" for n in ins}
            term, term1 = o.call(k, "d", dat), o.call(k, "d", dat1)
        lines += [f"    double d_{v} = 0.0;", "    {",
                  "        double ls[RUMUS_ROW_LANES];",
                  "        for (int j = 0; j < RUMUS_ROW_LANES; j++) ls[j] = 0.0;",
                  "        for (i = 0; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {",
                  f"            _Pragma(\"GCC unroll 1\") for (int j = 0; j < RUMUS_ROW_LANES; j++) ls[j] += {term};",
                  "        }",
                  f"        for (int j = 0; i < n; i++, j++) ls[j] += {term1};",
                  f"        for (int j = 0; j < RUMUS_ROW_LANES; j++) d_{v} += ls[j];",
                  "    }", f"    const float c_{v} = (float)d_{v};", f"    (void)c_{v};"]
    lines += ["    " + s for s in o.finalize()]
    e = ("o[i]" if stashed else o.call(last, "f", at1)) if o.e else ""
    lines.append(f"    for (i = 0; i < n; i++) o[i] = {o.call(None, 'f', at1, e)};")
    lines.append("}")
    return "\n".join(lines)


def _transcendental(src: str) -> bool:
    return any(f in src for f in _TRANSCENDENTAL)


def _grain(op: RowOp) -> str:
    """Rows with an exp or log per element split over threads sooner (csrc/internal/rumus.h's classes)."""
    return "RUMUS_GRAIN_ROWS" if any(_transcendental(t) for t in [*(p.element for p in op.passes), op.out]) else "0"


def render_rows() -> str:
    """The C text of every row op's element functions, row functions and the table."""
    lines = ['#include "internal/row_loops.h"', ""]
    entries = []
    for name, op in ROW_OPS.items():
        o = _Op(name, op)
        lines += o.functions()
        lines.append(_fast(o))
        for dt, (sfx, t, load, store) in ROW_DTYPES.items():
            lines.append(_generic(o, sfx, t, load, store))
            fast = (f"    if (so == 4 && si == 4) {{ rf_{name}((float *)w, in, n); return; }}\n"
                    if dt == "float32" else "")
            lines.append(f"static void row_{name}_{sfx}(char *w, const char *const *in, int64_t n, int64_t so, "
                         f"int64_t si) {{\n{fast}    rg_{name}_{sfx}(w, in, n, so, si);\n}}")
            entries.append(f'    {{"{name}_{sfx}", row_{name}_{sfx}, sizeof({t}), {len(op.inputs)}, {_grain(op)}}},')
    lines.append("static const rumus_row_entry ROW_TABLE[] = {\n" + "\n".join(entries) + "\n};")
    lines.append(_RUNNERS)
    return "\n".join(lines) + "\n"


_RUNNERS = """
int64_t rumus_rows_find(const char *name) { return RUMUS_FIND_IN(ROW_TABLE, name); }

void rumus_rows_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                    int64_t yo) {
    rumus_rows_exec(&ROW_TABLE[loop], meta, o, oo, x, xo, y, yo);
}
"""

"""C renderer of the elementwise expression table (and, through row_c.py, the row ops): the source file
csrc/build_cpu_kernels.py compiles.

Every (op, dtype) the renderer can express becomes one inline element function `ex_<op>_<sfx>` and
one strided loop from csrc/internal/ew_loops.h (contiguous and scalar-operand fast paths that gcc
vectorises, AVX2 clones, the shared N-d iterator with its OpenMP split). Function primitives are
`rx_<fn>_<sfx>` in csrc/internal/expr_fns.h (float32: the branch-free fastmath.h versions).
float16 and bfloat16 are storage formats only: their element function is the float32 one, and their
loops load 16-bit words into float, compute, and round the result back once (csrc/internal/half.h).
Stdlib only: the build imports this without numpy.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os

from .expr_lang import Renderer, Unsupported, parse
from .expressions import Expr, all_kernels

# dtype name: (C suffix, C type); bool is one byte holding 0 or 1
C_TYPES: dict[str, tuple[str, str]] = {
    "float32": ("f32", "float"), "float64": ("f64", "double"), "int64": ("i64", "int64_t"),
    "int32": ("i32", "int32_t"), "int16": ("i16", "int16_t"), "int8": ("i8", "int8_t"), "uint8": ("u8", "uint8_t"),
    "bool": ("b", "uint8_t"), "float16": ("f16", "uint16_t"), "bfloat16": ("bf16", "uint16_t"),
}
# storage dtype: (compute dtype, C load function, C store function); the others load and store as they are
WIDENED: dict[str, tuple[str, str, str]] = {
    "float16": ("float32", "rumus_h2f", "rumus_f2h"), "bfloat16": ("float32", "rumus_bf2f", "rumus_f2bf"),
}
GROUPS: dict[str, tuple[str, ...]] = {
    "float": ("float32", "float64", "float16", "bfloat16"),
}
GROUPS["signed"] = (*GROUPS["float"], "int64", "int32", "int8")
GROUPS["numeric"] = (*GROUPS["signed"], "uint8")
GROUPS["all"] = (*GROUPS["numeric"], "bool")

_INT_FNS = {"abs", "max", "min", "truthy", "isnan", "fmod"}
_GUARDED = {"sin", "cos"}  # float32: vectorised reduction, libm fix-up pass for huge arguments

PROTOTYPES = """
int64_t rumus_expr_find(const char *name);
void rumus_expr_run1(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                     double p1);
void rumus_expr_run2(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                     int64_t bo, double p0, double p1);
void rumus_expr_run3(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                     int64_t bo, char *c, int64_t co, double p0, double p1);
int64_t rumus_rows_find(const char *name);
void rumus_rows_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                    int64_t yo, char *c0, char *c1, double p0, double p1);
void rumus_rows_run_ext(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo, char *y,
                        int64_t yo, char *const *ptrs, const double *prm);
const char *rumus_expr_table_hash(void);
const char *rumus_sources_hash(void);
"""


class CRenderer(Renderer):
    def __init__(self, dtype: str, exact: bool = False) -> None:
        compute = WIDENED[dtype][0] if dtype in WIDENED else dtype
        self.sfx, self.ctype = C_TYPES[compute]
        self.floating = compute in ("float32", "float64")
        self.exact = exact
        self.guarded = False

    def const(self, v: float) -> str:
        if not self.floating:
            if v != int(v):
                raise Unsupported("a fractional constant in an integer kernel")
            return f"(({self.ctype}){int(v)})"
        return f"(({self.ctype}){v!r})"

    def neg(self, a: str) -> str:
        if self.sfx in ("u8", "b"):
            raise Unsupported("negating an unsigned value")
        return f"(-{a})"

    def binop(self, op: str, a: str, b: str) -> str:
        if self.sfx == "b":
            raise Unsupported("arithmetic on bools")
        if op == "//":
            return f"rx_floordiv_{self.sfx}({a}, {b})"
        if op == "%":
            return f"rx_mod_{self.sfx}({a}, {b})"
        if op == "/" and not self.floating:
            raise Unsupported("true division of integers")
        return f"({a} {op} {b})"

    def cmp(self, op: str, a: str, b: str) -> str:
        return f"({a} {op} {b})"

    def logic(self, op: str, a: str, b: str) -> str:
        return f"({a} {'&&' if op == 'and' else '||'} {b})"

    def select(self, c: str, a: str, b: str) -> str:
        return f"({c} ? {a} : {b})"

    def call(self, fn: str, args: list[str]) -> str:
        if self.sfx == "b" and fn != "truthy" or not self.floating and fn not in _INT_FNS:
            raise Unsupported(f"{fn} of an integer")
        if fn in _GUARDED and self.sfx == "f32" and not self.exact:
            self.guarded = True
            return f"rx_{fn}_fast_f32({', '.join(args)})"
        return f"rx_{fn}_{self.sfx}({', '.join(args)})"


_ELEMENTS: dict[tuple[str, str, str, bool], tuple[str, bool] | Unsupported] = {}


def _element(name: str, e: Expr, dtype: str, exact: bool = False) -> tuple[str, bool]:
    """(C element function ex_<name>_<sfx>, whether it used a guarded fast primitive); cached, since
    the CPU backend's claims and the stale-build check render the table at import."""
    key = (name, e.body, dtype, exact)
    hit = _ELEMENTS.get(key)
    if hit is None:
        try:
            hit = _render_element(name, e, dtype, exact)
        except Unsupported as exc:
            hit = exc
        _ELEMENTS[key] = hit
    if isinstance(hit, Unsupported):
        raise hit
    return hit


def _render_element(name: str, e: Expr, dtype: str, exact: bool) -> tuple[str, bool]:
    r = CRenderer(dtype, exact)
    sfx, t = C_TYPES[dtype][0], r.ctype  # named after the storage dtype, computing in the compute type
    params = {p: f"p{i}" for i, p in enumerate(e.params)}
    lets, (res, typ) = r.render(e.body, {**{n: n for n in e.inputs}, **params})
    if typ == "c":
        res = r.const(float(res))
    out = "uint8_t" if e.result == "bool" else t
    fname = f"ex_{name}_{sfx}{'_exact' if exact else ''}"
    args = ", ".join([*(f"{t} {n}" for n in e.inputs), f"{t} p0", f"{t} p1"])
    body = ["(void)p0;", "(void)p1;", *(f"const {t if ty == 'T' else 'int'} {n} = {v};" for n, v, ty in lets),
            f"return ({out})({res});"]
    return f"static inline {out} {fname}({args}) {{ " + " ".join(body) + " }", r.guarded


def dtypes_for(e: Expr) -> tuple[str, ...]:
    return GROUPS[e.dtypes]


def supported(name: str, e: Expr) -> list[str]:
    """The dtype names the C renderer expresses `name` for (what the CPU backend claims)."""
    out = []
    for dt in dtypes_for(e):
        if dt not in C_TYPES:
            continue
        try:
            _element(name, e, dt)
        except Unsupported:
            continue
        out.append(dt)
    return out


def render_table() -> tuple[str, list[tuple[str, int, int]]]:
    """(C text of element functions, loops and table; [(loop name, operand count, item sizes...)])."""
    lines: list[str] = []
    entries: list[str] = []
    for name, e in all_kernels().items():
        parse(e.body)  # syntax errors name the op
        n_in = len(e.inputs)
        for dt in supported(name, e):
            sfx, t = C_TYPES[dt]
            out = "uint8_t" if e.result == "bool" else t
            compute, load, store = WIDENED.get(dt, (dt, "RUMUS_AS_IS", "RUMUS_AS_IS"))
            if e.result == "bool":
                store = "RUMUS_AS_IS"
            fn, guarded = _element(name, e, dt)
            lines.append(fn)
            loop = f"{name}_{sfx}"
            if guarded and n_in == 1 and e.body.strip() in ("sin(x)", "cos(x)") and dt not in WIDENED:
                lines.append(_element(name, e, dt, exact=True)[0])
                lines.append(f"EW_LOOP1_FIXUP(loop_{loop}, {t}, {out}, ex_{loop}, ex_{loop}_exact)")
            else:
                if guarded:
                    fn, _ = _element(name, e, dt, exact=True)
                    lines[-1] = fn.replace("_exact(", "(", 1)
                io = f"{C_TYPES[compute][1]}, {load}, {store}"
                lines.append(f"EW_LOOP{n_in}(loop_{loop}, {t}, {out}, {io}, ex_{loop})")
            sizes = [f"sizeof({out})", *([f"sizeof({t})"] * n_in)]
            sizes += ["0"] * (4 - len(sizes))
            entries.append(f'    {{"{loop}", loop_{loop}, {{{", ".join(sizes)}}}}},')
    table = "static const rumus_loop_entry TABLE[] = {\n" + "\n".join(entries) + "\n};\n"
    return "\n".join(lines) + "\n\n" + table, []


_RUNNERS = """
#define TABLE_SIZE ((int64_t)(sizeof(TABLE) / sizeof(TABLE[0])))
#define OFF(ptr, off, k) ((ptr) + (off) * (int64_t)e->isz[k])

int64_t rumus_expr_find(const char *name) { return rumus_table_find(TABLE, TABLE_SIZE, name); }

void rumus_expr_run1(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                     double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[2] = {OFF(o, oo, 0), OFF(a, ao, 1)};
    const double params[2] = {p0, p1};
    rumus_iterate(2, meta, base, e->isz, e->fn, params);
}

void rumus_expr_run2(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                     int64_t bo, double p0, double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[3] = {OFF(o, oo, 0), OFF(a, ao, 1), OFF(b, bo, 2)};
    const double params[2] = {p0, p1};
    rumus_iterate(3, meta, base, e->isz, e->fn, params);
}

void rumus_expr_run3(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                     int64_t bo, char *c, int64_t co, double p0, double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[4] = {OFF(o, oo, 0), OFF(a, ao, 1), OFF(b, bo, 2), OFF(c, co, 3)};
    const double params[2] = {p0, p1};
    rumus_iterate(4, meta, base, e->isz, e->fn, params);
}
"""

HEADER = """/* GENERATED by rumus_contracts/ops/expr_c.py from the expression table (expressions.py) at build
   time; not committed.  Edit the table, not this file. */
#include <math.h>
#include <stdint.h>

#include "internal/rumus.h"
#include "internal/fastmath.h"
#include "internal/expr_fns.h"
#include "internal/ew_loops.h"
#include "internal/half.h"
"""


@functools.lru_cache(maxsize=1)
def table_source() -> str:
    """The generated C text without the hash functions (what the table hash covers): the elementwise
    table, then the row ops of row_ops.py (row_c.py; imported here, since it builds on this module)."""
    from .row_c import render_rows
    body, _ = render_table()
    return HEADER + "\n" + body + _RUNNERS + "\n" + render_rows()


def table_hash() -> str:
    return hashlib.sha256(table_source().encode()).hexdigest()


def c_source(sources_hash: str) -> str:
    """The whole generated file, with the table hash and the C sources' hash compiled in."""
    src = table_source()
    digest = hashlib.sha256(src.encode()).hexdigest()
    return (src + f'\nconst char *rumus_expr_table_hash(void) {{ return "{digest}"; }}\n'
            f'const char *rumus_sources_hash(void) {{ return "{sources_hash}"; }}\n')


def sources_hash(csrc: str) -> str:
    """sha256 over every C source and header under csrc/ (relative names and contents)."""
    digest = hashlib.sha256()
    paths = glob.glob(os.path.join(csrc, "*.[ch]")) + glob.glob(os.path.join(csrc, "internal", "*.h"))
    for path in sorted(paths, key=lambda p: os.path.relpath(p, csrc).replace(os.sep, "/")):
        digest.update(os.path.relpath(path, csrc).replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()

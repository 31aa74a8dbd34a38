"""WGSL renderer of the expression table: one helper function per (op, compute kind).

Compute kinds are the WebGPU backend's: f (f32 math; float16 storage is widened), i (i32; bool
inputs are computed as 0/1 integers), l (int64 as vec2<u32> with emulated arithmetic, the i64_*
helpers of shaders/int64.wgsl). A primitive a kind lacks raises Unsupported: no kernel is claimed.
"""

from __future__ import annotations

from .expr_lang import Renderer, Unsupported
from .expr_wgsl_float import FLOAT_HELPERS
from .expressions import Expr

TYPES = {"f": "f32", "i": "i32", "l": "vec2<u32>"}
PARAMS = ("bitcast<f32>(cfg.p.x)", "bitcast<f32>(cfg.p.y)")

# WGSL's built-ins are not trusted at the edges (Vulkan lets exp, log, tanh, atan2, pow lose accuracy, flush
# subnormals and ignore NaN and signed zeros): the float helpers below are written out to give the C99 / IEEE
# answers the CPU backend gives, NaN tested on the bits.
_F_CALLS = {
    "exp": "exp_f({0})", "log": "log_f({0})", "sqrt": "sqrt({0})", "rsqrt": "inverseSqrt({0})", "sin": "sin_f({0})",
    "cos": "cos_f({0})", "tanh": "tanh_f({0})", "sigmoid": "sigmoid_f({0})", "erf": "erf_f({0})",
    "phi": "(0.5 * erfc_f({0} * (-0.7071067811865476)))",
    "floor": "floor({0})", "ceil": "ceil({0})", "trunc": "trunc({0})", "rint": "round({0})",  # ties to even
    "abs": "abs({0})", "pow": "pow_f({0}, {1})", "fmod": "fmod_f({0}, {1})", "atan2": "atan2_f({0}, {1})",
    "max": "max_f({0}, {1})", "min": "min_f({0}, {1})", "isnan": "isnan_f({0})", "isinf": "isinf_f({0})",
    "isfinite": "isfinite_f({0})", "truthy": "truthy_f({0})", "log1p": "log1p_f({0})", "expm1": "expm1_f({0})",
}
# float comparisons: NaN compares unequal and unordered (a compiler may assume `x != x` is false)
_F_CMP = {"<": "lt_f({0}, {1})", ">": "lt_f({1}, {0})", "<=": "le_f({0}, {1})", ">=": "le_f({1}, {0})",
          "==": "eq_f({0}, {1})", "!=": "(!eq_f({0}, {1}))"}
_I_CALLS = {"abs": "abs({0})", "max": "max({0}, {1})", "min": "min({0}, {1})", "truthy": "({0} != 0)",
            "isnan": "false", "fmod": "fmod_i({0}, {1})"}
_L_CALLS = {"abs": "i64_abs({0})", "max": "i64_max({0}, {1})", "min": "i64_min({0}, {1})",
            "truthy": "any({0} != vec2<u32>(0u))", "isnan": "false", "fmod": "fmod_l({0}, {1})"}
_L_CMP = {"<": "i64_lt({0}, {1})", ">": "i64_lt({1}, {0})", "<=": "!i64_lt({1}, {0})", ">=": "!i64_lt({0}, {1})",
          "==": "i64_eq({0}, {1})", "!=": "!i64_eq({0}, {1})"}

HELPERS: dict[str, str] = {
    **FLOAT_HELPERS,
    "isnan_f": "\nfn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    "isinf_f": "\nfn isinf_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }",
    "isfinite_f": "\nfn isfinite_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) < 0x7f800000u; }",
    # on the bits, as the casts to bool (backends' layout.py): a GPU may flush a subnormal to zero in a float
    # compare (the H200 did), which would make logical_not(1e-40) true
    "truthy_f": "\nfn truthy_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }",
    "mod_f": """
// Python's modulo: the divisor's sign
fn mod_f(a: f32, b: f32) -> f32 {
    let m = fmod_f(a, b);
    return select(m, m + b, m != 0.0 && ((b < 0.0) != (m < 0.0)));  // NaN m: both tests false
}""",
    "floordiv_f": """
// Python's floor division on floats (numpy's and PyTorch's algorithm)
fn floordiv_f(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return a / b; }
    let m = fmod_f(a, b);
    var d = (a - m) / b;
    if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
    if (d == 0.0) { return bitcast<f32>(bitcast<u32>(a / b) & 0x80000000u); }  // copysign(0, a / b)
    let f = floor(d);
    return select(f, f + 1.0, d - f > 0.5);
}""",
    # Signed % with a negative operand is undefined in Vulkan's SPIR-V (OpSRem/OpSMod): NVIDIA's driver
    # returned the floored remainder (conformance on the H200). Quotient and remainder are taken
    # on the magnitudes as u32 (OpUDiv/OpUMod, defined for all operands), then signed as C truncates.
    "fmod_i": """
fn fmod_i(a: i32, b: i32) -> i32 {
    if (b == 0 || b == -1) { return 0; }
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let r = select(ua, 0u - ua, a < 0) % select(ub, 0u - ub, b < 0);
    return bitcast<i32>(select(r, 0u - r, a < 0));
}""",
    "tdiv_i": """
// C's truncating quotient (see fmod_i: on the magnitudes, then signed)
fn tdiv_i(a: i32, b: i32) -> i32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let q = select(ua, 0u - ua, a < 0) / select(ub, 0u - ub, b < 0);
    return bitcast<i32>(select(q, 0u - q, (a < 0) != (b < 0)));
}""",
    "mod_i": """
fn mod_i(a: i32, b: i32) -> i32 {
    let m = fmod_i(a, b);
    return select(m, m + b, m != 0 && ((b < 0) != (m < 0)));
}""",
    "floordiv_i": """
// the core refuses integer division by zero before a kernel runs
fn floordiv_i(a: i32, b: i32) -> i32 {
    if (b == 0) { return 0; }
    if (b == -1) { return -a; }
    let q = tdiv_i(a, b);
    return select(q, q - 1, (fmod_i(a, b) != 0) && ((a < 0) != (b < 0)));
}""",
    "u64_divmod": """
// unsigned 64-bit long division, one quotient bit per step: (quotient, remainder)
fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> array<vec2<u32>, 2> {
    var q = vec2<u32>(0u);
    var r = vec2<u32>(0u);
    for (var i = 63u; i < 64u; i--) {
        r = vec2<u32>(r.x << 1u, (r.y << 1u) | (r.x >> 31u));
        r.x = r.x | (select(n.x >> i, n.y >> (i - 32u), i >= 32u) & 1u);
        if (r.y > d.y || (r.y == d.y && r.x >= d.x)) {
            r = i64_sub(r, d);
            if (i >= 32u) { q.y = q.y | (1u << (i - 32u)); } else { q.x = q.x | (1u << i); }
        }
    }
    return array<vec2<u32>, 2>(q, r);
}""",
    "fmod_l": """
// C's truncating remainder on int64 (the core refuses division by zero before a kernel runs)
fn fmod_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (all(b == vec2<u32>(0u))) { return vec2<u32>(0u); }
    let r = u64_divmod(i64_abs(a), i64_abs(b))[1];
    return select(r, i64_neg(r), i64_is_neg(a));
}""",
    "mod_l": """
fn mod_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let m = fmod_l(a, b);
    return select(m, i64_add(m, b), any(m != vec2<u32>(0u)) && (i64_is_neg(b) != i64_is_neg(m)));
}""",
    "floordiv_l": """
fn floordiv_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (all(b == vec2<u32>(0u))) { return vec2<u32>(0u); }
    let qr = u64_divmod(i64_abs(a), i64_abs(b));
    let neg = i64_is_neg(a) != i64_is_neg(b);
    let q = select(qr[0], i64_neg(qr[0]), neg);
    return select(q, i64_sub(q, vec2<u32>(1u, 0u)), neg && any(qr[1] != vec2<u32>(0u)));
}""",
}
def _calls(text: str) -> list[str]:
    return [h for h in HELPERS if f"{h}(" in text]


def _closure(roots: list[str]) -> list[str]:
    """roots and every helper they call, transitively (WGSL needs no declaration before use)."""
    seen: list[str] = []
    todo = list(roots)
    while todo:
        h = todo.pop()
        if h not in seen:
            seen.append(h)
            todo += [d for d in _calls(HELPERS[h].split("{", 1)[1]) if d != h]
    return seen


def helper_source(names: list[str]) -> str:
    """WGSL of the named helpers and every helper they call (for kernels outside the table, e.g. clamp)."""
    return "".join(HELPERS[h] for h in _closure(names))


# each helper's helpers, found in its text (the fused kernels' renderer reads this table too)
_DEPENDS: dict[str, tuple[str, ...]] = {h: tuple(d for d in _closure([h]) if d != h) for h in HELPERS}


def _is_zero(text: str) -> bool | None:
    """Whether a rendered operand is the constant 0.0 (None: not a number literal)."""
    try:
        return float(text.strip("()")) == 0.0
    except ValueError:
        return None


class WgslRenderer(Renderer):
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def const(self, v: float) -> str:
        if self.kind == "f":
            text = repr(v)
            return f"({text})" if text.startswith("-") else text
        if v != int(v):
            raise Unsupported("a fractional constant in an integer kernel")
        if self.kind == "i":
            return f"({int(v)})"
        w = int(v) & 0xFFFFFFFFFFFFFFFF
        return f"vec2<u32>({w & 0xFFFFFFFF}u, {w >> 32}u)"

    def neg(self, a: str) -> str:
        return f"i64_neg({a})" if self.kind == "l" else f"(-{a})"

    def binop(self, op: str, a: str, b: str) -> str:
        if self.kind == "l":
            fn = {"+": "i64_add", "-": "i64_sub", "*": "i64_mul", "//": "floordiv_l", "%": "mod_l"}.get(op)
            if fn is None:
                raise Unsupported(f"int64 {op} on WebGPU")
            return f"{fn}({a}, {b})"
        if op in ("//", "%"):
            return f"{'floordiv' if op == '//' else 'mod'}_{self.kind}({a}, {b})"
        if op == "/" and self.kind == "i":
            raise Unsupported("true division of integers")
        return f"({a} {op} {b})"

    def cmp(self, op: str, a: str, b: str) -> str:
        if self.kind == "l":
            return _L_CMP[op].format(a, b)
        return _F_CMP[op].format(a, b) if self.kind == "f" else f"({a} {op} {b})"

    def logic(self, op: str, a: str, b: str) -> str:
        return f"({a} {'&&' if op == 'and' else '||'} {b})"

    def select(self, c: str, a: str, b: str) -> str:
        if self.kind == "f" and _is_zero(b) and _is_zero(a) is False and a.strip("()").startswith("-"):
            return f"zero_or_f({c}, {a})"  # a +0.0 that stays +0.0 (see zero_or_f)
        return f"select({b}, {a}, {c})"

    def call(self, fn: str, args: list[str]) -> str:
        table = {"f": _F_CALLS, "i": _I_CALLS, "l": _L_CALLS}[self.kind]
        if fn not in table:
            raise Unsupported(f"{fn} for WGSL kind {self.kind}")
        return table[fn].format(*args)


def function(name: str, e: Expr, kind: str) -> tuple[str, str]:
    """(WGSL source of `fn ex_<name>(inputs) -> result` with the helpers it calls, call expression over
    the map skeleton's a, b, c). Raises Unsupported when the kind lacks a primitive."""
    r = WgslRenderer(kind)
    params = {p: PARAMS[i] for i, p in enumerate(e.params)}
    lets, (res, typ) = r.render(e.body, {**{n: n for n in e.inputs}, **params})
    if typ == "c":
        res = r.const(float(res))
    t = TYPES[kind]
    out = "bool" if e.result == "bool" else t
    args = ", ".join(f"{n}: {t}" for n in e.inputs)
    body = [f"    let {n} = {v};" for n, v, _ in lets] + [f"    return {res};"]
    src = f"fn ex_{name}({args}) -> {out} {{\n" + "\n".join(body) + "\n}"
    helpers = "".join(HELPERS[h] for h in _closure(_calls(src)))
    return helpers + "\n" + src, f"ex_{name}({', '.join('abc'[:len(e.inputs)])})"

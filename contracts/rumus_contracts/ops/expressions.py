"""The elementwise expression table: every elementwise op, and its derivative, written once.

Each entry is language-neutral (a Python-syntax expression, see expr_lang.py for the vocabulary).
From this one table:
- csrc/build_cpu_kernels.py renders the C kernel bodies at build time (expr_c.py),
- the WebGPU backend renders WGSL at pipeline creation (expr_wgsl.py),
- each backend claims the (op, dtype) pairs its renderer can express, nothing listed by hand,
- `grad` entries become fused backward ops `<op>_backward` (unary) or `<op>_backward_a` / `_b`
  (binary, after the schema's input names), each `g * d op / d input`, with schemas
  (expr_schemas.py) and the core's formulas (rumus/autograd/formulas_table.py),
- the float64 reference of a fused backward op is the same derivative evaluated by numpy; it is
  proven by the forward op's gradient check against finite differences of the hand-written forward
  reference in the op's schema module.

Stdlib only: the C build imports this file without numpy (pip's isolated build environment).
Dtype groups are names (see GROUPS in expr_schemas.py): float, signed, numeric, all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expr:
    """One elementwise op: `body` over inputs x (and y), attribute parameters by name.

    result  -- "same" (the input dtype) or "bool".
    params  -- attributes and their defaults, in the order backends pass them (at most two).
    grad    -- per differentiable input, d body / d input (constants "0" and "1" need no kernel); one
               that names the incoming gradient g is the backward body itself.
    grad_out -- d body / d x written in the result y, for the ops whose derivative is cheapest from their
               output (tanh, sigmoid): its fused backward `<op>_backward` takes (g, y), as PyTorch's
               tanh_backward(grad_output, output) does; the core's formula saves the output for it.
    """

    body: str
    dtypes: str
    inputs: tuple[str, ...] = ("x",)
    result: str = "same"
    params: dict[str, float] = field(default_factory=dict)
    grad: dict[str, str] = field(default_factory=dict)
    grad_out: str | None = None


def unary(body: str, dtypes: str = "float", grad: str | None = None, result: str = "same",
          grad_out: str | None = None, **params: float) -> Expr:
    return Expr(body, dtypes, ("x",), result, params, {"x": grad} if grad else {}, grad_out)


def binary(body: str, dtypes: str = "numeric", result: str = "same", **grad: str) -> Expr:
    return Expr(body, dtypes, ("x", "y"), result, {}, grad)


SOFTPLUS_20 = "where(x > 20, x, log1p(exp(min(x, 20))))"  # PyTorch's softplus with threshold 20

EXPRESSIONS: dict[str, Expr] = {
    # ---- unary math (the core's formulas.py differentiates the pre-table ones from their outputs)
    "neg": unary("-x", "signed"),
    "abs": unary("abs(x)", "signed"),
    # its backward selects g (a NaN or inf grad where x <= 0 gives 0, like PyTorch's threshold_backward)
    "relu": unary("where(x < 0, 0, x)", "signed", grad="where(x > 0, g, 0)"),
    "exp": unary("exp(x)"),
    "log": unary("log(x)"),
    "sqrt": unary("sqrt(x)"),
    "rsqrt": unary("rsqrt(x)"),
    "sin": unary("sin(x)"),
    "cos": unary("cos(x)"),
    # from the output, each product rounded in the order of the formula's ops before the fused op (and of
    # PyTorch's tanh_backward / sigmoid_backward): g * (1 - y * y), g * (y * (1 - y))
    "tanh": unary("tanh(x)", grad_out="1 - y * y"),
    "sigmoid": unary("sigmoid(x)", grad_out="y * (1 - y)"),
    "log1p": unary("log1p(x)", grad="1 / (1 + x)"),
    "expm1": unary("expm1(x)", grad="exp(x)"),
    "floor": unary("floor(x)", grad="0"),
    "ceil": unary("ceil(x)", grad="0"),
    "round": unary("rint(x)", grad="0"),  # half to even, like PyTorch
    "trunc": unary("trunc(x)", grad="0"),
    "sign": unary("where(x > 0, 1, where(x < 0, -1, 0))", "signed", grad="0"),  # NaN gives 0, like PyTorch
    "reciprocal": unary("1 / x", grad="-1 / (x * x)"),
    "square": unary("x * x", "numeric", grad="2 * x"),
    "isnan": unary("isnan(x)", result="bool"),
    "isinf": unary("isinf(x)", result="bool"),
    "isfinite": unary("isfinite(x)", result="bool"),
    "logical_not": unary("not truthy(x)", "all", result="bool"),
    # ---- binary arithmetic (x // y and x % y follow Python: floor, and the divisor's sign)
    "add": binary("x + y"),
    "sub": binary("x - y"),
    "mul": binary("x * y"),
    "div": binary("x / y", "float"),
    "pow": binary("pow(x, y)", "float"),
    "maximum": binary("where(x > y or isnan(x), x, y)"),  # NaN propagates, like PyTorch
    "minimum": binary("where(x < y or isnan(x), x, y)"),
    "floor_divide": binary("x // y", x="0", y="0"),
    "remainder": binary("x % y", x="1", y="-floor(x / y)"),
    "fmod": binary("fmod(x, y)", x="1", y="-trunc(x / y)"),
    "atan2": binary("atan2(x, y)", "float", x="y / (x * x + y * y)", y="-x / (x * x + y * y)"),
    # ---- comparisons and logic (bool results)
    "eq": binary("x == y", "all", "bool"),
    "ne": binary("x != y", "all", "bool"),
    "lt": binary("x < y", "all", "bool"),
    "le": binary("x <= y", "all", "bool"),
    "gt": binary("x > y", "all", "bool"),
    "ge": binary("x >= y", "all", "bool"),
    "logical_and": binary("truthy(x) and truthy(y)", "all", "bool"),
    "logical_or": binary("truthy(x) or truthy(y)", "all", "bool"),
    "logical_xor": binary("truthy(x) != truthy(y)", "all", "bool"),
    # ---- activations (PyTorch's definitions)
    "erf": unary("erf(x)", grad="1.1283791670955126 * exp(-x * x)"),
    "gelu": unary("x * phi(x)", grad="phi(x) + x * 0.3989422804014327 * exp(-0.5 * x * x)"),
    "gelu_tanh": unary(
        "0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))",
        # 1 + t = 2 s and 1 - t * t = 4 s (1 - s) with s = sigmoid(2 u): no cancellation where t rounds to -1
        # (x < -5 in float32, where the tanh form gives 0 for a gradient of about -1e-7)
        grad="s = sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x)); "
             "s * (1 + 2 * x * (1 - s) * 0.7978845608028654 * (1 + 0.134145 * x * x))"),
    "silu": unary("x / (1 + exp(-x))", grad="s = 1 / (1 + exp(-x)); s * (1 + x * (1 - s))"),
    "leaky_relu": unary("where(x > 0, x, x * negative_slope)", grad="where(x > 0, 1, negative_slope)",
                        negative_slope=0.01),
    "softplus": unary("where(x * beta > threshold, x, log1p(exp(min(x * beta, threshold))) / beta)",
                      grad="where(x * beta > threshold, 1, sigmoid(min(x * beta, threshold)))",
                      beta=1.0, threshold=20.0),
    "elu": unary("where(x > 0, x, alpha * expm1(min(x, 0)))", grad="where(x > 0, 1, alpha * exp(min(x, 0)))",
                 alpha=1.0),
    "celu": unary("where(x > 0, x, alpha * expm1(min(x, 0) / alpha))", grad="where(x > 0, 1, exp(min(x, 0) / alpha))",
                  alpha=1.0),
    "selu": unary("1.0507009873554805 * where(x > 0, x, 1.6732632423543772 * expm1(min(x, 0)))",
                  grad="1.0507009873554805 * where(x > 0, 1, 1.6732632423543772 * exp(min(x, 0)))"),
    "softsign": unary("x / (1 + abs(x))", grad="d = 1 + abs(x); 1 / (d * d)"),
    "mish": unary(f"x * tanh({SOFTPLUS_20})",
                  grad=f"t = tanh({SOFTPLUS_20}); t + x * sigmoid(x) * (1 - t * t)"),
    "hardswish": unary("x * min(max(x + 3, 0), 6) / 6", grad="where(x < -3, 0, where(x <= 3, x / 3 + 0.5, 1))"),
    "hardsigmoid": unary("min(max(x / 6 + 0.5, 0), 1)", grad="where(x > -3 and x < 3, 1 / 6, 0)"),
    "logsigmoid": unary("min(x, 0) - log1p(exp(-abs(x)))", grad="1 / (1 + exp(x))"),
    "tanhshrink": unary("x - tanh(x)", grad="t = tanh(x); t * t"),
    "logaddexp": binary("where(x == y, x + 0.6931471805599453, max(x, y) + log1p(exp(-abs(x - y))))", "float",
                        x="1 / (1 + exp(y - x))", y="1 / (1 + exp(x - y))"),
}


def backward_name(op: str, wrt: str) -> str:
    """The fused backward op of `op` for input `wrt` (unary ops have one: `<op>_backward`)."""
    return f"{op}_backward" if len(EXPRESSIONS[op].inputs) == 1 else f"{op}_backward_{'ab'['xy'.index(wrt)]}"


def backward_ops() -> dict[str, tuple[str, str, Expr]]:
    """{fused backward op: (forward op, input, its Expr: g * derivative over (g, *inputs))}; an op with
    `grad_out` has one over (g, y) instead, its input named "y".

    Constant derivatives ("0", "1") get no op: the core's formula handles them without a kernel."""
    out = {}
    for op, e in EXPRESSIONS.items():
        if e.grad_out is not None:
            out[f"{op}_backward"] = (op, "y", Expr(f"g * ({e.grad_out})", "float", ("g", "y"), "same", dict(e.params)))
        for wrt, d in e.grad.items():
            if d.strip() in ("0", "1"):
                continue
            *lets, last = [s.strip() for s in d.split(";")]
            # a derivative that names g is the whole backward body already (a select, not g * mask)
            body = "; ".join([*lets, last if re.search(r"\bg\b", last) else f"g * ({last})"])
            out[backward_name(op, wrt)] = (op, wrt, Expr(body, "float", ("g", *e.inputs), "same", dict(e.params)))
    return out


def all_kernels() -> dict[str, Expr]:
    """Every op the backends compile: the forward entries and the fused backward ops."""
    return {**EXPRESSIONS, **{name: e for name, (_, _, e) in backward_ops().items()}}

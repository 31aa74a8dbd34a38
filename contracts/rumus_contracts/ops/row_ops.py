"""The row-op table: ops that reduce each row along one dim and then write it, written once.

An entry is a map-reduce template in the expression language of expressions.py (expr_lang.py):
passes, each folding an element expression into one row value with a reduction (max or sum, the later
passes free to use the earlier values), a finalize step (lets over the row values), and the output
expression of one element (over the inputs, the row values and the lets). In the output, `e` names the
last pass's element value: a renderer may keep it from the pass (C stores it in the output row) or
compute it again (WGSL), so no op types it twice. From this one table:
- csrc/build_cpu_kernels.py renders the C row kernels at build time (row_c.py),
- the WebGPU backend renders its row shaders' folds and stores at pipeline creation (row_wgsl.py).
A renderer that sees a max pass followed by the sum of exp(E - max) may fold both in one online
(max, sum) walk (WGSL does); the math stays the table's.

Two optional fields widen the template (their defaults keep an entry what it was):
- `per_row`: the output is one value per row (a reduction such as logsumexp): `out` is then an expression
  over the row values and lets only, written once at the row's place in an output whose reduced dim has
  size 1 (keepdim layout);
- `column_sums`: further outputs of one value per column, (name, element expression) pairs: the element
  expression (the scope of `out`, without `e`) summed over every row, in float64, into an output as long
  as a row (a norm backward's weight and bias gradients). Rows are split into partitions fixed by the
  shape (never by the thread count), each summed in order, the partitions then added in order: the same
  bits at every thread count. The outputs follow the row output, in the order listed.
- `row_inputs`: operands of one value per row (a per-row output's incoming grad, a saved per-row value, a
  class index), contiguous in row order, read as float64 (kind "T": the op's dtype; "int64": an index);
  names in every expression's scope;
- `row_outputs`: further outputs of one value per row, (name, expression over the row values and lets),
  contiguous in row order, after the row output and the column sums;
- `Pass.when`: a condition over the row values before the pass (parameters, `n`, row inputs): where it is
  false the pass does not walk the row and its sum is 0 (sum passes only);
- `zero_if`: a condition over the parameters, `n` and the row inputs: where it holds the row is not walked
  and writes 0 (every output element, the per-row output, the row outputs; it adds nothing to the column
  sums), whatever its elements hold (an ignored class index);
- the name `i` in element expressions: the element's index in the row (0..n-1);
- `at(operand, index)` in row-level lets (`then`, finalize): the element of an input or column operand at
  `index` in the row, 0 where index is outside 0..n-1 (a class index's logit, its weight);
- `grouped_columns`: the column operands hold one value per channel, a row being a block of channels of
  S elements each, taken from G groups in turn (group norm: row r = (sample, group r % G) of C / G
  channels of the spatial size S): element i of row r reads column (r % G) * (n / S) + i / S, with G and
  S given at launch (G = S = 1 is the plain layout). The column operands are then G * n / S long, and so
  are the column sums, element i of row r adding into its own column.

Stdlib only: the C build imports this file without numpy.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

REDUCTIONS = ("max", "sum")  # max propagates NaN, as torch's amax; sums accumulate in float64 on the CPU


@dataclass(frozen=True)
class Pass:
    """One walk over the row: `value` = reduce(element) over the row's elements."""

    value: str
    reduce: str
    element: str
    then: str = ""  # `name = expr; ...` over the row values so far, for the later passes
    when: str = ""  # a condition over the row values so far: false skips the walk (sum passes: the value is 0)


@dataclass(frozen=True)
class RowOp:
    """inputs -- per-element operands sharing one layout (backward ops: the incoming grad g, then y).
    passes   -- the row reductions, in order.
    finalize -- `name = expr; ...` over the row values (empty: none).
    out      -- one output element over inputs, row values, finalize names and `e`.
    columns  -- operands indexed by the element's place in the row, the same for every row (a norm's
                weight and bias), contiguous.
    params   -- attributes (or values the backend derives, such as a sum of class weights) and their
                defaults, in the order backends pass them (at most four).
    per_row  -- the output holds one value per row, `out` over the row values and lets (module docstring).
    column_sums -- (name, element expression) outputs summed over the rows, one value per column
                (module docstring); at most two.
    row_inputs  -- (name, "T" | "int64") operands of one value per row (module docstring); at most four.
    row_outputs -- (name, expression) further per-row outputs (module docstring); at most two.
    zero_if  -- a condition under which the row writes 0 without being walked (module docstring).
    grouped_columns -- the columns are per channel of (sample, group) rows (module docstring).
    Every expression may also use `n`, the row length."""

    inputs: tuple[str, ...]
    passes: tuple[Pass, ...]
    finalize: str
    out: str
    columns: tuple[str, ...] = ()
    params: tuple[tuple[str, float], ...] = ()
    per_row: bool = False
    column_sums: tuple[tuple[str, str], ...] = ()
    row_inputs: tuple[tuple[str, str], ...] = ()
    row_outputs: tuple[tuple[str, str], ...] = ()
    zero_if: str = ""
    grouped_columns: bool = False

    @property
    def row_values(self) -> tuple[str, ...]:
        return tuple(p.value for p in self.passes)

    @property
    def lets(self) -> tuple[tuple[str, str], ...]:
        """The finalize step as (name, expression) pairs."""
        return split_lets(self.finalize)

    def uses_e(self) -> bool:
        return any(isinstance(n, ast.Name) and n.id == "e" for n in ast.walk(ast.parse(self.out)))

    def uses_index(self) -> bool:
        """Whether an element expression names `i`, the element's index in the row."""
        sources = [*(p.element for p in self.passes), *([] if self.per_row else [self.out]),
                   *(src for _, src in self.column_sums)]
        return any(isinstance(n, ast.Name) and n.id == "i" for src in sources for n in ast.walk(ast.parse(src)))

    def online_pair(self) -> bool:
        """Whether the passes are a max over E then the sum of exp(E - max): one online (max, sum) walk."""
        if len(self.passes) != 2:
            return False
        first, second = self.passes
        return (first.reduce == "max" and second.reduce == "sum"
                and _same(second.element, f"exp(({first.element}) - {first.value})"))


def split_lets(src: str) -> tuple[tuple[str, str], ...]:
    """`name = expr; ...` as (name, expression) pairs."""
    out = []
    for part in filter(None, (s.strip() for s in src.split(";"))):
        name, _, expr = part.partition("=")
        out.append((name.strip(), expr.strip()))
    return tuple(out)


def _same(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a, mode="eval")) == ast.dump(ast.parse(b, mode="eval"))


_SHIFTED = (Pass("m", "max", "x"), Pass("s", "sum", "exp(x - m)"))  # a max-shifted sum of exp
# the layer norm's row statistics, for the later passes (two passes: no cancellation for offset data)
_MOMENTS = (Pass("s1", "sum", "x", then="mean = s1 / n"),
            Pass("ss", "sum", "(x - mean) * (x - mean)", then="rstd = 1 / sqrt(ss / n + eps)"))

ROW_OPS: dict[str, RowOp] = {
    "softmax": RowOp(("x",), _SHIFTED, "inv = 1 / s", "e * inv"),
    "log_softmax": RowOp(("x",), _SHIFTED, "ls = log(s)", "x - m - ls"),
    # dx = y * (g - sum(g * y)); for log_softmax, dx = g - exp(y) * sum(g)
    "softmax_backward": RowOp(("g", "y"), (Pass("s", "sum", "g * y"),), "", "y * (g - s)"),
    "log_softmax_backward": RowOp(("g", "y"), (Pass("s", "sum", "g"),), "", "g - exp(y) * s"),
    # the biased variance from the centred values (two passes: no cancellation for offset data)
    "layer_norm": RowOp(("x",), (Pass("s1", "sum", "x", then="mean = s1 / n"),
                                 Pass("ss", "sum", "(x - mean) * (x - mean)")),
                        "rstd = 1 / sqrt(ss / n + eps)", "(x - mean) * (rstd * w) + b", columns=("w", "b"),
                        params=(("eps", 1e-5),)),
    "rms_norm": RowOp(("x",), (Pass("ss", "sum", "x * x"),), "rstd = 1 / sqrt(ss / n + eps)", "x * (rstd * w)",
                      columns=("w",), params=(("eps", 1e-6),)),
    # an infinite max shifts by 0 (PyTorch's rule): a row of -inf gives -inf, a row holding +inf gives +inf
    "logsumexp": RowOp(("x",), (Pass("m", "max", "x", then="sh = where(isinf(m), 0, m)"),
                                Pass("s", "sum", "exp(x - sh)")), "", "log(s) + sh", per_row=True),
    # with xh = (x - mean) * rstd and gh = g * w: dx = rstd * (gh - mean(gh) - xh * mean(gh * xh)),
    # dw = sum over rows of g * xh, db = sum of g (RMS: mean 0 and no mean(gh) term)
    "layer_norm_backward": RowOp(
        ("g", "x"), (*_MOMENTS, Pass("a", "sum", "g * w"), Pass("b", "sum", "g * w * ((x - mean) * rstd)")),
        "ma = a / n; mb = b / n", "xh = (x - mean) * rstd; rstd * (g * w - ma - xh * mb)", columns=("w",),
        params=(("eps", 1e-5),), column_sums=(("gw", "g * ((x - mean) * rstd)"), ("gb", "g"))),
    "rms_norm_backward": RowOp(
        ("g", "x"), (Pass("ss", "sum", "x * x", then="rstd = 1 / sqrt(ss / n + eps)"),
                     Pass("b", "sum", "g * w * (x * rstd)")),
        "mb = b / n", "xh = x * rstd; rstd * (g * w - xh * mb)", columns=("w",), params=(("eps", 1e-6),),
        column_sums=(("gw", "g * (x * rstd)"),)),
    # class-index cross-entropy (rumus_contracts/ops/cross_entropy.py): w the class weights (all 1 for none),
    # s = label_smoothing; loss = (1 - s) w_t (lse - x_t) + (s / n) sum_c w_c (lse - x_c), 0 where ignored
    "cross_entropy_fwd": RowOp(
        ("x",), (Pass("m", "max", "x", then="sh = where(isinf(m), 0, m)"),
                 Pass("s", "sum", "exp(x - sh)", then="lse = log(s) + sh"),
                 Pass("sm", "sum", "w * (lse - x)", when="label_smoothing != 0")),
        "wt = at(w, t); xt = at(x, t)",
        "where(t == ignore_index, 0, (1 - label_smoothing) * wt * (lse - xt) + label_smoothing / n * sm)",
        columns=("w",), params=(("ignore_index", -100.0), ("label_smoothing", 0.0)), per_row=True,
        row_inputs=(("t", "int64"),), row_outputs=(("lse", "lse"),)),
    # dx = g ((1 - s) w_t (p - [i == t]) + (s / n) (W p - w)) with p = exp(x - lse), W = wsum = sum(w)
    "cross_entropy_bwd": RowOp(
        ("x",), (), "wt = at(w, t); gt = g * (1 - label_smoothing) * wt; "
                    "ga = g * ((1 - label_smoothing) * wt + label_smoothing / n * wsum); "
                    "gb = g * (label_smoothing / n)",
        "ga * exp(x - lse) - gb * w - where(i == t, gt, 0)", columns=("w",),
        params=(("ignore_index", -100.0), ("label_smoothing", 0.0), ("wsum", 0.0)),
        row_inputs=(("g", "T"), ("t", "int64"), ("lse", "T")), zero_if="t == ignore_index"),
}
# group norm: the layer norm's rows over (sample, group) blocks, its weight and bias one per channel
ROW_OPS["group_norm"] = replace(ROW_OPS["layer_norm"], grouped_columns=True)
ROW_OPS["group_norm_backward"] = replace(ROW_OPS["layer_norm_backward"], grouped_columns=True)

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

Stdlib only: the C build imports this file without numpy.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

REDUCTIONS = ("max", "sum")  # max propagates NaN, as torch's amax; sums accumulate in float64 on the CPU


@dataclass(frozen=True)
class Pass:
    """One walk over the row: `value` = reduce(element) over the row's elements."""

    value: str
    reduce: str
    element: str
    then: str = ""  # `name = expr; ...` over the row values so far, for the later passes


@dataclass(frozen=True)
class RowOp:
    """inputs -- per-element operands sharing one layout (backward ops: the incoming grad g, then y).
    passes   -- the row reductions, in order.
    finalize -- `name = expr; ...` over the row values (empty: none).
    out      -- one output element over inputs, row values, finalize names and `e`.
    columns  -- operands indexed by the element's place in the row, the same for every row (a norm's
                weight and bias), contiguous.
    params   -- attributes and their defaults, in the order backends pass them (at most two).
    Every expression may also use `n`, the row length."""

    inputs: tuple[str, ...]
    passes: tuple[Pass, ...]
    finalize: str
    out: str
    columns: tuple[str, ...] = ()
    params: tuple[tuple[str, float], ...] = ()

    @property
    def row_values(self) -> tuple[str, ...]:
        return tuple(p.value for p in self.passes)

    @property
    def lets(self) -> tuple[tuple[str, str], ...]:
        """The finalize step as (name, expression) pairs."""
        return split_lets(self.finalize)

    def uses_e(self) -> bool:
        return any(isinstance(n, ast.Name) and n.id == "e" for n in ast.walk(ast.parse(self.out)))

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
}

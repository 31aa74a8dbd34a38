"""The op x dtype coverage matrix: one row per op that ran, one short column per dtype family.

Packed dtypes with a parameter (`fixed_i16(k)`, `q8(b)`, `int4(g)`) share one column per family,
showing the worst outcome over all their parameters, so the matrix stays within WIDTH columns.
"""

from __future__ import annotations

from collections import defaultdict

from .harness import backend_name, claims

WIDTH = 120
_RANK = {"failed": 5, "xpass": 5, "missing": 4, "xfail": 3, "skipped": 2, "passed": 1}
_CELL = {"failed": "FAIL", "xpass": "XPAS", "missing": "MISS", "xfail": "xf", "skipped": "skip", "passed": "ok"}
_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}
_FAMILY = {"fixed_i16": "fx16", "q8": "q8", "int4": "i4"}


def column(dtype: str) -> str:
    """The matrix column of a dtype name: "float32" -> "f32", every "fixed_i16(k)" -> "fx16"."""
    family = dtype.split("(")[0]
    return _SHORT.get(dtype) or _FAMILY.get(family) or dtype[:6]


class Matrix:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)

    def record(self, op: str, dtype: str, kind: str, outcome: str) -> None:
        self.cells[(op, dtype)][kind] = outcome

    def worst(self, op: str, dtype: str) -> str:
        kinds = self.cells.get((op, dtype))
        return max(kinds.values(), key=lambda o: _RANK.get(o, 0)) if kinds else ""


MATRIX = Matrix()


def render(matrix: Matrix = MATRIX, name: str | None = None) -> str:
    name = name or backend_name()
    ran_ops = sorted({op for op, _ in matrix.cells})
    status = {(c.op, c.dtype.name): c.status for c in claims(name) if c.op in ran_ops}
    columns: list[str] = []
    for dtype in sorted({d for (_, d), st in status.items() if st != "unsupported"}, key=_order):
        if column(dtype) not in columns:
            columns.append(column(dtype))
    cell_w = 5
    op_w = max(12, min(max((len(o) for o in ran_ops), default=2), WIDTH - cell_w * len(columns) - 1)) + 1
    lines = [f"backend: {name}", ("op".ljust(op_w) + "".join(c.ljust(cell_w) for c in columns)).rstrip()]
    totals: dict[str, int] = defaultdict(int)
    for op in ran_ops:
        worst: dict[str, str] = {}
        for (o, dtype), st in status.items():
            if o != op or st == "unsupported":
                continue
            col = column(dtype)
            outcome = matrix.worst(op, dtype) or "notrun"
            if _RANK.get(outcome, 0) >= _RANK.get(worst.get(col, ""), 0):
                worst[col] = outcome
        row = (op if len(op) < op_w else op[:op_w - 2] + "~").ljust(op_w)
        for col in columns:
            cell = _CELL.get(worst[col], "-") if col in worst else "."
            if cell not in ".-":
                totals[cell] += 1
            row += cell.ljust(cell_w)
        lines.append(row.rstrip())
    lines.append("cells: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    lines.append("ok: forward, non-contiguous and gradient checks passed; FAIL: a check failed; MISS: held dtype, "
                 "no kernel;")
    lines.append("xf: known gap (xfails file); XPAS: listed as a gap but passed; -: not run (deselected);")
    lines.append(f".: the op lacks the dtype or the backend does not hold it; {'/'.join(_FAMILY.values())}: "
                 f"worst over all scales")
    return "\n".join(line[:WIDTH] for line in lines)


def _order(dtype: str) -> tuple[int, str]:
    keys = list(_SHORT) + list(_FAMILY)
    family = dtype.split("(")[0]
    return (keys.index(dtype) if dtype in keys else keys.index(family) if family in keys else len(keys), dtype)

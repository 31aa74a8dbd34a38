"""The op x dtype coverage matrix: one row per op that ran, one short column per dtype family, each
cell the worst outcome over its checks; then the missing primitives ranked by the cells they would
unlock, and each failing cell with its worst error.

Packed dtypes with a parameter (`fixed_i16(k)`, `q8(b)`, `int4(g)`) share one column per family,
showing the worst outcome over all their parameters, so the matrix stays within WIDTH columns.
"""

from __future__ import annotations

from collections import defaultdict

from .harness import backend_name, claims
from .outcomes import (
    FAIL, MISSING, NO_DTYPE, OK_DECOMPOSED, OK_KERNEL, RESULTS, SKIP, UNTESTED, XFAIL, XPASS, CellResult, Results,
    is_primitive,
)

WIDTH = 120
# a skipped check (nothing to check) does not hide the passed checks of its cell
_RANK = {SKIP: 1, OK_KERNEL: 2, OK_DECOMPOSED: 3, XFAIL: 4, MISSING: 5, UNTESTED: 6, FAIL: 7, XPASS: 7}
LABEL = {OK_KERNEL: "ok", OK_DECOMPOSED: "dec", SKIP: "skip", XFAIL: "xf", MISSING: "MISS", UNTESTED: "UNT",
         FAIL: "FAIL", XPASS: "XPAS"}
_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}
_FAMILY = {"fixed_i16": "fx16", "q8": "q8", "int4": "i4"}
_LISTED = 40  # failing cells printed; --json has every one
_EXAMPLES = 4  # cells named per missing primitive


def column(dtype: str) -> str:
    """The matrix column of a dtype name: "float32" -> "f32", every "fixed_i16(k)" -> "fx16"."""
    family = dtype.split("(")[0]
    return _SHORT.get(dtype) or _FAMILY.get(family) or dtype[:6]


def worst(cells: list[CellResult]) -> str:
    return max((c.outcome for c in cells), key=lambda o: _RANK.get(o, 0)) if cells else ""


def render(results: Results | None = None, name: str | None = None) -> str:
    results = results or RESULTS
    name = name or backend_name()
    status = {(c.op, c.dtype.name): c.status for c in claims(name)}
    by_cell: dict[tuple[str, str], list[CellResult]] = defaultdict(list)
    for cell in results.cells.values():
        if cell.dtype != NO_DTYPE:
            by_cell[(cell.op, cell.dtype)].append(cell)
    ran_ops = sorted({op for op, _ in by_cell})
    dtypes = {d for (op, d), st in status.items() if st != "unsupported" and op in ran_ops} | {d for _, d in by_cell}
    columns: list[str] = []
    for dtype in sorted(dtypes, key=_order):
        if column(dtype) not in columns:
            columns.append(column(dtype))
    cell_w = 5
    op_w = max(12, min(max((len(o) for o in ran_ops), default=2), WIDTH - cell_w * len(columns) - 1)) + 1
    lines = [f"backend: {name}", ("op".ljust(op_w) + "".join(c.ljust(cell_w) for c in columns)).rstrip()]
    totals: dict[str, int] = defaultdict(int)
    for op in ran_ops:
        per_col: dict[str, list[CellResult]] = defaultdict(list)
        held: set[str] = set()
        for (o, dtype), st in status.items():
            if o == op and st != "unsupported":
                held.add(column(dtype))
        for (o, dtype), cells in by_cell.items():
            if o == op:
                per_col[column(dtype)].extend(cells)
        row = (op if len(op) < op_w else op[:op_w - 2] + "~").ljust(op_w)
        for col in columns:
            outcome = worst(per_col.get(col, []))
            label = LABEL.get(outcome, "-") if outcome else ("-" if col in held else ".")
            if label not in ".-":
                totals[label] += 1
            row += label.ljust(cell_w)
        lines.append(row.rstrip())
    lines.append("cells (op x dtype, worst check): " + _count(totals))
    checks: dict[str, int] = defaultdict(int)
    for cell in results.cells.values():
        checks[LABEL[cell.outcome]] += 1
    lines.append("checks (op x dtype x check, error inputs included): " + _count(checks))
    lines.append("ok: the backend's kernel passed every check; dec: passed by the core's decomposition or composite;")
    lines.append("FAIL: a result differs from the reference, or raised; MISS: a kernel it needs is missing (named "
                 "below);")
    lines.append("UNT: a kernel no sample reaches; xf: known gap (xfails file); XPAS: listed as a gap but passed;")
    lines.append("skip: nothing to check; -: not run (deselected); .: the op lacks the dtype or the backend does "
                 "not hold it;")
    lines.append(f"{'/'.join(_FAMILY.values())}: worst over all scales")
    lines += _missing_section(results)
    lines += _problem_section(results)
    return "\n".join(line[:WIDTH] for line in lines)


def _missing_section(results: Results) -> list[str]:
    ranked = results.missing_ranked()
    if not ranked:
        return []
    lines = ["missing primitives, ranked by the op x dtype cells they would unlock (a cell naming several needs "
             "them all):"]
    w = max(len(p) for p, _ in ranked)
    for prim, cells in ranked:
        named = ", ".join(f"{op}/{column(d)}" for op, d in cells[:_EXAMPLES])
        more = f", +{len(cells) - _EXAMPLES} more" if len(cells) > _EXAMPLES else ""
        # an op outside the primitives is missing only while the core has no decomposition for it
        kind = "  (not a primitive: the core lacks its decomposition)" if is_primitive(prim) is False else ""
        lines.append(f"  {prim.ljust(w)}  {len(cells):4d} cell{'s' if len(cells) != 1 else ' '}  {named}{more}{kind}")
    return lines


def _problem_section(results: Results) -> list[str]:
    bad = sorted((c for c in results.cells.values() if c.outcome in (FAIL, MISSING, UNTESTED, XPASS)),
                 key=lambda c: (-_RANK[c.outcome], c.op, c.dtype, c.check))
    if not bad:
        return []
    lines = ["cells to fix (worst error per cell; --json FILE writes every cell):"]
    for c in bad[:_LISTED]:
        what = f"listed at {c.listed_at} but passed: remove the entry" if c.outcome == XPASS else c.summary()
        lines.append(f"  {LABEL[c.outcome]:4} {c.op} {c.dtype} {c.check}: {' '.join(what.split())}")
    if len(bad) > _LISTED:
        lines.append(f"  ... {len(bad) - _LISTED} more")
    return lines


def _count(totals: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(totals.items())) or "none"


def _order(dtype: str) -> tuple[int, str]:
    keys = list(_SHORT) + list(_FAMILY)
    family = dtype.split("(")[0]
    return (keys.index(dtype) if dtype in keys else keys.index(family) if family in keys else len(keys), dtype)

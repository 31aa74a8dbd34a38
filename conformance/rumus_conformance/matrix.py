"""The op x dtype coverage matrix: passed / FAILED / missing per cell."""

from __future__ import annotations

from collections import defaultdict

from .harness import backend_name, claims

_RANK = {"failed": 3, "missing": 2, "skipped": 1, "passed": 0}


class Matrix:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)

    def record(self, op: str, dtype: str, kind: str, outcome: str) -> None:
        self.cells[(op, dtype)][kind] = outcome

    def status(self, op: str, dtype: str) -> str:
        kinds = self.cells.get((op, dtype))
        if not kinds:
            return ""
        worst = max(kinds.values(), key=lambda o: _RANK.get(o, 0))
        return {"passed": "ok", "failed": "FAIL", "missing": "missing", "skipped": "skip"}.get(worst, worst)


MATRIX = Matrix()


def render() -> str:
    name = backend_name()
    all_claims = claims(name)
    dtypes = sorted({c.dtype.name for c in all_claims if c.status != "unsupported"})
    ops = sorted({c.op for c in all_claims})
    status = {(c.op, c.dtype.name): c.status for c in all_claims}
    width = min(max(len(o) for o in ops), 34) + 2
    lines = [f"backend: {name}", "op".ljust(width) + "".join(d[:10].ljust(11) for d in dtypes)]
    totals: dict[str, int] = defaultdict(int)
    for op in ops:
        row = op[:width - 2].ljust(width)
        for d in dtypes:
            st = status.get((op, d))
            cell = "" if st is None else "-" if st == "unsupported" else MATRIX.status(op, d) or (
                "missing" if st == "missing" else "not run")
            if cell:
                totals[cell] += 1
            row += cell.ljust(11)
        lines.append(row)
    lines.append("cells: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())) +
                 "   (ok: forward, non-contiguous and gradient checks passed; - : dtype not held)")
    return "\n".join(lines)

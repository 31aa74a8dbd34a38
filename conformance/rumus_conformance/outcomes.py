"""What one conformance cell came to, as data: the matrix, `--json` and `--write-xfails` read these.

A cell is one (op, dtype, check): check is "forward", "noncontiguous", "gradient", or "errors" (the op's
error inputs, dtype "-"). Its outcome is decided from what the checks returned and raised (a mismatch,
a `KernelNotFound` naming an op, the dispatch route of the op), never from message text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

OK_KERNEL = "ok-kernel"          # every sample passed, the backend's own kernel ran
OK_DECOMPOSED = "ok-decomposed"  # every sample passed through the core's decomposition or composite
FAIL = "FAIL"                    # a sample's result differs from the reference, or the call raised
MISSING = "MISSING"              # an op the check needs (the op itself or a primitive it calls) has no kernel
UNTESTED = "UNTESTED"            # a kernel is registered but no sample can exercise it
SKIP = "skip"                    # nothing to check (e.g. no differentiable sample for this dtype)
XFAIL = "xfail"                  # listed in the xfails file and still failing (`underlying` says how)
XPASS = "XPASS"                  # listed in the xfails file but passed: the entry must go

OUTCOMES = (OK_KERNEL, OK_DECOMPOSED, FAIL, MISSING, UNTESTED, SKIP, XFAIL, XPASS)
GAPS = (FAIL, MISSING, UNTESTED)  # what fails a run unless listed
CHECKS = ("forward", "noncontiguous", "gradient", "errors")
NO_DTYPE = "-"  # the dtype of an "errors" cell: error inputs run once per op

CellKey = tuple[str, str, str]  # (op, dtype name, check)


@dataclass(frozen=True)
class Mismatch:
    """Why one sample failed. `ratio` is the worst element's error over what the tolerance allows
    (> 1 fails; inf for a wrong shape, a missing gradient or an exception), so failures rank."""
    message: str
    ratio: float = math.inf
    abs_error: float | None = None
    rel_error: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"message": self.message, "ratio": _num(self.ratio), "abs": _num(self.abs_error),
                "rel": _num(self.rel_error)}


@dataclass(frozen=True)
class CellResult:
    op: str
    dtype: str
    check: str
    outcome: str
    route: str = ""  # the top-level op's dispatch route: "kernel", "composite", "decomposition", or mixed
    worst: Mismatch | None = None  # FAIL: the worst failing sample's mismatch
    sample: str = ""  # FAIL: that sample, described (name, input shapes, attrs)
    failed: int = 0  # samples that failed
    ran: int = 0  # samples that ran
    missing: tuple[str, ...] = ()  # MISSING: the ops without a kernel, each named by KernelNotFound
    detail: str = ""  # UNTESTED / SKIP / a crash outside the samples: what happened, for people
    underlying: str = ""  # XFAIL / XPASS: the outcome the cell had before the xfails file was applied
    listed_at: str = ""  # XFAIL / XPASS: "file:line" of the entry

    @property
    def key(self) -> CellKey:
        return (self.op, self.dtype, self.check)

    @property
    def is_gap(self) -> bool:
        """Failing, whether listed as a known gap or not (what --write-xfails writes)."""
        return self.outcome in GAPS or self.outcome == XFAIL

    def listed(self, where: str) -> CellResult:
        """The cell after an xfails entry at `where` covered it."""
        ok = self.outcome in (OK_KERNEL, OK_DECOMPOSED)
        if self.outcome == SKIP:
            return self
        return replace(self, outcome=XPASS if ok else XFAIL, underlying=self.outcome, listed_at=where)

    def summary(self) -> str:
        """One line for people: what is wrong with this cell (empty when nothing is)."""
        base = self.underlying if self.outcome in (XFAIL, XPASS) else self.outcome
        if base == FAIL and self.worst is not None:
            where = f" [{self.sample}]" if self.sample else ""
            return f"{self.failed} of {self.ran} samples failed; worst{where}: {self.worst.message}"
        if base == MISSING:
            return "no kernel for " + ", ".join(self.missing)
        return self.detail

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "dtype": self.dtype, "check": self.check, "outcome": self.outcome,
                "underlying": self.underlying or None, "route": self.route or None,
                "worst_error": self.worst.as_json() if self.worst else None, "sample": self.sample or None,
                "samples_ran": self.ran, "samples_failed": self.failed,
                "missing_primitives": list(self.missing), "detail": self.detail or None,
                "listed_at": self.listed_at or None}


@dataclass
class Results:
    """Every cell of a run, by key, plus the plain tests (modules, plugin loading) by test id."""
    cells: dict[CellKey, CellResult] = field(default_factory=dict)
    raw: dict[CellKey, CellResult] = field(default_factory=dict)  # as the check left it, before xfails
    tests: dict[str, str] = field(default_factory=dict)  # other tests: node id -> pytest outcome

    def record_raw(self, cell: CellResult) -> None:
        self.raw[cell.key] = cell

    def take_raw(self, key: CellKey) -> CellResult | None:
        return self.raw.pop(key, None)

    def record(self, cell: CellResult) -> None:
        self.cells[cell.key] = cell

    def missing_ranked(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Each op named as missing, with the (op, dtype) cells naming it, most cells first: the
        primitives a backend would gain most from (a cell missing several needs all of them)."""
        by_prim: dict[str, set[tuple[str, str]]] = {}
        for c in self.cells.values():
            for prim in c.missing:
                by_prim.setdefault(prim, set()).add((c.op, c.dtype))
        return sorted(((p, sorted(cells)) for p, cells in by_prim.items()), key=lambda pc: (-len(pc[1]), pc[0]))

    def counts(self) -> dict[str, int]:
        out = {o: 0 for o in OUTCOMES}
        for c in self.cells.values():
            out[c.outcome] += 1
        return {o: n for o, n in out.items() if n}

    def clear(self) -> None:
        self.cells.clear()
        self.raw.clear()
        self.tests.clear()


def is_primitive(op: str) -> bool | None:
    """Whether `op` is one of the primitives every backend must provide (rumus_contracts.PRIMITIVES),
    rather than an op whose decomposition the core lacks; None where the contracts list no primitives."""
    import rumus_contracts
    primitives = getattr(rumus_contracts, "PRIMITIVES", None)
    return None if primitives is None else op in primitives


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    return x if math.isfinite(x) else str(x)  # JSON has no inf / nan


RESULTS = Results()

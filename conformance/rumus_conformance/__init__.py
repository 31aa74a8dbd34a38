"""The RUMUS conformance suite: every op x dtype x sample of the op registry, on any backend.

    RUMUS_BACKEND=wgpu pytest --pyargs rumus_conformance
    rumus conformance --backend wgpu [--xfails FILE] [--json FILE] [--write-xfails FILE]

Each test judges one cell (op, dtype, check: forward, noncontiguous, gradient, errors) into a
structured `CellResult` (cells.py, outcomes.py): ok-kernel, ok-decomposed, FAIL (with the worst error
and its sample), MISSING (naming the kernel that is absent: the op's own, or a primitive its
decomposition calls), UNTESTED, skip, xfail, XPASS. The matrix, `--json` and `--write-xfails` read
those results, never failure text. Known gaps are listed by cell in an xfails file (xfails.py).
docs/CONFORMANCE.md describes the outcomes, the JSON and the xfails format.
"""

from .harness import Claim, backend_name, claims
from .outcomes import RESULTS, CellResult, Mismatch, Results

__all__ = ["RESULTS", "CellResult", "Claim", "Mismatch", "Results", "backend_name", "claims"]

"""Every op x dtype the backend claims: forward values, non-contiguous inputs, gradients, error inputs."""

from __future__ import annotations

import pytest

from rumus import backend_api as api

from . import harness
from .cells import run_cell, run_errors, target
from .outcomes import FAIL, MISSING, RESULTS, SKIP, UNTESTED, CellResult

BACKEND = harness.backend_name()
TARGET = target(BACKEND)
CLAIMS = [c for c in harness.claims(BACKEND) if c.status != "unsupported"]
SCHEMAS = {s.name: s for s in api.plugins().ops}


def _id(c: harness.Claim) -> str:
    return f"{c.op}-{c.dtype.name}"


def _settle(cell: CellResult) -> None:
    """Keep the cell's result for the report hook, and tell pytest (and the person reading) how it went."""
    RESULTS.record_raw(cell)
    where = f"{cell.op} / {cell.dtype}" + (f" ({cell.check})" if cell.check != "errors" else " (error inputs)")
    if cell.outcome == FAIL:
        head = f"{cell.failed} of {cell.ran} samples failed:\n" if cell.ran else ""
        pytest.fail(head + cell.detail, pytrace=False)
    if cell.outcome == MISSING:
        # strict: the backend holds this dtype, so a kernel (or the primitives a decomposition needs) is
        # expected; a known gap goes in the xfails file (see xfails.py), never silently here
        pytest.fail(f"MISSING: backend '{BACKEND}' has no kernel for {', '.join(cell.missing)}, which {where} "
                    f"needs", pytrace=False)
    if cell.outcome == UNTESTED:
        pytest.fail(f"UNTESTED: {cell.detail}", pytrace=False)
    if cell.outcome == SKIP:
        pytest.skip(cell.detail)


def test_plugins_loaded() -> None:
    """Every plugin loaded, whole: a plugin that failed, or a part of one that did (a kernel module
    that did not import, a stale C build), fails conformance."""
    broken = api.plugins().all_failures()
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("claim", CLAIMS, ids=_id)
def test_forward(claim: harness.Claim) -> None:
    _settle(run_cell(TARGET, claim, "forward"))


@pytest.mark.parametrize("claim", CLAIMS, ids=_id)
def test_noncontiguous(claim: harness.Claim) -> None:
    _settle(run_cell(TARGET, claim, "noncontiguous"))


GRAD_CLAIMS = [c for c in CLAIMS if c.dtype.is_floating and SCHEMAS[c.op].differentiable
               and not SCHEMAS[c.op].inplace]


@pytest.mark.parametrize("claim", GRAD_CLAIMS, ids=_id)
def test_gradient(claim: harness.Claim) -> None:
    _settle(run_cell(TARGET, claim, "gradient"))


ERROR_OPS = [s.name for s in SCHEMAS.values() if s.error_samples is not None]


@pytest.mark.parametrize("op", ERROR_OPS)
def test_error_inputs(op: str) -> None:
    _settle(run_errors(TARGET, op))

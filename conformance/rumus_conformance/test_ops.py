"""Every op x dtype the backend claims: forward values, non-contiguous inputs, gradients, error inputs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rumus import backend_api as api
from rumus_contracts import RumusError

from . import harness
from .cases import accepts, error_samples, kernel_samples, samples

BACKEND = harness.backend_name()
try:
    _be = api.backend(BACKEND)
    DEVICE = str(_be.devices()[0])
    CAPS = _be.capabilities(_be.devices()[0]).dtypes
    UNAVAILABLE = ""
except RumusError as exc:
    DEVICE, CAPS, UNAVAILABLE = BACKEND, (), str(exc)

CLAIMS = [c for c in harness.claims(BACKEND) if c.status != "unsupported"]
SCHEMAS = {s.name: s for s in api.plugins().ops}


def _id(c: harness.Claim) -> str:
    return f"{c.op}-{c.dtype.name}"


def _run_all(claim: harness.Claim, check: Callable[..., str | None], **kw: bool) -> None:
    if UNAVAILABLE:
        pytest.fail(f"backend unavailable: {UNAVAILABLE}")
    if claim.status == "missing":
        # strict: the backend holds this dtype and the op is no composite, so a kernel is expected;
        # a known gap goes in the xfails file (see xfails.py), never silently here
        pytest.fail(f"MISSING: backend '{BACKEND}' has no kernel for {claim.op} / {claim.dtype}", pytrace=False)
    schema = SCHEMAS[claim.op]
    failures, ran = [], 0
    entries = api.plugins().kernels.candidates(claim.op, BACKEND, claim.dtype)
    conditional = {i: 0 for i, e in enumerate(entries) if e.applies is not None}  # samples each one took
    for given in samples(schema) + kernel_samples(schema, entries):
        schema, sample = harness.spelled_out(SCHEMAS[claim.op], given)  # a multi-tensor op's list: plain inputs
        if kw.get("grad") and not sample.grad:
            continue
        if sample.dtypes and sample.dtypes[schema.dispatch_on] not in (None, claim.dtype):
            continue  # samples with explicit dtypes run under their own dispatch dtype only
        reason = harness.skip_reason(schema, sample, claim.dtype, CAPS)
        if reason:
            continue
        ran += 1
        for i, e in enumerate(entries):
            if e.applies is not None and accepts(e, schema, sample):
                conditional[i] += 1
                break  # the first conditional kernel that accepts is the one that runs
        try:
            msg = check(schema, sample, claim.dtype, DEVICE, kw.get("noncontiguous", False))
        except Exception as exc:  # a crash in one sample is a failure of that sample
            msg = f"raised {type(exc).__name__}: {exc}"
        if msg:
            failures.append(f"[{sample.name or '?'} attrs={dict(sample.attrs)}] {msg}")
    if failures:
        pytest.fail(f"{len(failures)} of {ran} samples failed:\n" + "\n".join(failures[:8]))
    idle = [entries[i].owner for i, n in conditional.items() if n == 0]
    if idle and not kw.get("grad"):
        pytest.fail(f"UNTESTED: the conditional kernel(s) of {idle} for {claim.op} / {claim.dtype} on '{BACKEND}' "
                    f"accept none of the samples; register them with samples= that their applies() accepts",
                    pytrace=False)
    if ran == 0 and kw.get("grad"):
        pytest.skip("no differentiable sample applies to this dtype on this backend")
    if ran == 0:
        # a kernel is registered for (op, dtype) but nothing can exercise it: e.g. a dtype the backend
        # does not hold. Untested is not passed.
        pytest.fail(f"UNTESTED: backend '{BACKEND}' registers a kernel for {claim.op} / {claim.dtype}, but no "
                    f"sample of the op can run with it here (does the backend hold {claim.dtype}?)", pytrace=False)


def test_plugins_loaded() -> None:
    """Every plugin loaded, whole: a plugin that failed, or a part of one that did (a kernel module
    that did not import, a stale C build), fails conformance."""
    broken = api.plugins().all_failures()
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("claim", CLAIMS, ids=_id)
def test_forward(claim: harness.Claim) -> None:
    _run_all(claim, harness.check_forward)


@pytest.mark.parametrize("claim", CLAIMS, ids=_id)
def test_noncontiguous(claim: harness.Claim) -> None:
    _run_all(claim, harness.check_forward, noncontiguous=True)


GRAD_CLAIMS = [c for c in CLAIMS if c.dtype.is_floating and SCHEMAS[c.op].differentiable
               and not SCHEMAS[c.op].inplace]


@pytest.mark.parametrize("claim", GRAD_CLAIMS, ids=_id)
def test_gradient(claim: harness.Claim) -> None:
    _run_all(claim, harness.check_gradient, grad=True)


ERROR_OPS = [s.name for s in SCHEMAS.values() if s.error_samples is not None]


@pytest.mark.parametrize("op", ERROR_OPS)
def test_error_inputs(op: str) -> None:
    if UNAVAILABLE:
        pytest.fail(f"backend unavailable: {UNAVAILABLE}")
    failures = [msg for err in error_samples(SCHEMAS[op]) if (msg := harness.check_error(SCHEMAS[op], err, DEVICE))]
    assert not failures, "\n".join(failures)

"""Running one conformance cell: every sample of an (op, dtype) through one check, into a CellResult.

The outcome comes from what each sample returned or raised: a `Mismatch` (FAIL, the worst one kept),
a `KernelNotFound` (MISSING, naming the op it names: the op itself, or a primitive its decomposition
or composite calls), and the op's dispatch route (ok by its own kernel, or ok decomposed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rumus import backend_api as api
from rumus_contracts import DType, KernelNotFound, OpSchema, RumusError, Sample

from . import harness
from .cases import accepts, error_samples, kernel_samples, samples
from .outcomes import (
    FAIL, MISSING, NO_DTYPE, OK_DECOMPOSED, OK_KERNEL, SKIP, UNTESTED, CellResult, Mismatch,
)

Judge = Callable[[OpSchema, Sample, DType, str, bool], "Mismatch | None"]
JUDGES: dict[str, Judge] = {"forward": harness.judge_forward, "noncontiguous": harness.judge_forward,
                            "gradient": harness.judge_gradient}
_SHOWN = 8  # failing samples listed for people (the JSON keeps the worst one's numbers)


@dataclass(frozen=True)
class Target:
    """The backend under test, as the checks need it."""
    backend: str
    device: str
    caps: tuple[DType, ...]
    unavailable: str  # why the backend cannot start; "" when it can


def target(name: str) -> Target:
    try:
        be = api.backend(name)
        return Target(name, str(be.devices()[0]), tuple(be.capabilities(be.devices()[0]).dtypes), "")
    except RumusError as exc:
        return Target(name, name, (), str(exc))


def missing_op(exc: BaseException) -> str | None:
    """The op a `KernelNotFound` names, following explicit re-raises (`raise X from exc`); None for
    any other error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KernelNotFound):
            return seen.op
        seen = seen.__cause__
    return None


def describe(sample: Sample) -> str:
    shapes = ", ".join("x".join(map(str, np.shape(a))) or "scalar" for a in sample.inputs)
    attrs = f" attrs {dict(sample.attrs)}" if sample.attrs else ""
    return f"{sample.name or '?'}: inputs ({shapes}){attrs}"


def run_cell(t: Target, claim: harness.Claim, check: str) -> CellResult:
    """Every sample of `claim`'s op and dtype through `check` ("forward", "noncontiguous", "gradient")."""
    op, dtype = claim.op, claim.dtype
    base = CellResult(op, dtype.name, check, FAIL)
    if t.unavailable:
        return _broken(base, f"backend unavailable: {t.unavailable}")
    judge, grad = JUDGES[check], check == "gradient"
    full = _schema(op)
    entries = api.plugins().kernels.candidates(op, t.backend, dtype)
    conditional = {i: 0 for i, e in enumerate(entries) if e.applies is not None}  # samples each one took
    failures: list[tuple[Mismatch, str]] = []
    missing: set[str] = set()
    routes: set[str] = set()
    ran = 0
    for given in samples(full) + kernel_samples(full, entries):
        schema, sample = harness.spelled_out(full, given)  # a multi-tensor op's list: plain inputs
        if grad and not sample.grad:
            continue
        if sample.dtypes and sample.dtypes[schema.dispatch_on] not in (None, dtype):
            continue  # samples with explicit dtypes run under their own dispatch dtype only
        if harness.skip_reason(schema, sample, dtype, t.caps):
            continue
        ran += 1
        for i, e in enumerate(entries):
            if e.applies is not None and accepts(e, schema, sample):
                conditional[i] += 1
                break  # the first conditional kernel that accepts is the one that runs
        with api.trace_dispatch() as log:
            try:
                bad = judge(schema, sample, dtype, t.device, check == "noncontiguous")
            except Exception as exc:  # a crash in one sample is a failure of that sample
                prim = missing_op(exc)
                if prim is not None:
                    missing.add(prim)
                    continue
                bad = Mismatch(f"raised {type(exc).__name__}: {exc}")
        first = _first_of(log, op)
        if first < len(log):
            routes.add(log[first][2])
        if bad is not None:
            failures.append((bad, describe(sample)))
    route = "+".join(sorted(routes))
    if failures:
        worst, where = max(failures, key=lambda f: f[0].ratio)  # max() keeps the first of equals
        shown = "\n".join(f"[{w}] {m.message}" for m, w in failures[:_SHOWN])
        return CellResult(op, dtype.name, check, FAIL, route, worst, where, len(failures), ran,
                          tuple(sorted(missing)), shown)
    if missing:
        return CellResult(op, dtype.name, check, MISSING, route, ran=ran, missing=tuple(sorted(missing)))
    idle = [entries[i].owner for i, n in conditional.items() if n == 0]
    if idle and not grad:
        return CellResult(op, dtype.name, check, UNTESTED, route, ran=ran, detail=(
            f"the conditional kernel(s) of {idle} for {op} / {dtype} on '{t.backend}' accept none of the "
            f"samples; register them with samples= that their applies() accepts"))
    if ran == 0:
        if claim.status == "missing":
            return CellResult(op, dtype.name, check, MISSING, missing=(op,))
        if grad:
            return CellResult(op, dtype.name, check, SKIP,
                              detail="no differentiable sample applies to this dtype on this backend")
        # a kernel is registered for (op, dtype) but nothing can exercise it: untested is not passed
        return CellResult(op, dtype.name, check, UNTESTED, detail=(
            f"backend '{t.backend}' registers a kernel for {op} / {dtype}, but no sample of the op can run "
            f"with it here (does the backend hold {dtype}?)"))
    decomposed = bool(routes & {"composite", "decomposition"})
    return CellResult(op, dtype.name, check, OK_DECOMPOSED if decomposed else OK_KERNEL, route, ran=ran)


def run_errors(t: Target, op: str) -> CellResult:
    """The op's error inputs: each must raise its error class (with its message part)."""
    base = CellResult(op, NO_DTYPE, "errors", FAIL)
    if t.unavailable:
        return _broken(base, f"backend unavailable: {t.unavailable}")
    schema = _schema(op)
    failures: list[str] = []
    missing: set[str] = set()
    errs = error_samples(schema)
    for err in errs:
        try:
            msg = harness.check_error(schema, err, t.device)
        except Exception as exc:  # check_error lets only KernelNotFound through (when not the expected error)
            prim = missing_op(exc)
            if prim is None:
                raise
            missing.add(prim)
            continue
        if msg:
            failures.append(msg)
    if failures:
        return CellResult(op, NO_DTYPE, "errors", FAIL, worst=Mismatch(failures[0]), failed=len(failures),
                          ran=len(errs), missing=tuple(sorted(missing)), detail="\n".join(failures[:_SHOWN]))
    if missing:
        return CellResult(op, NO_DTYPE, "errors", MISSING, ran=len(errs), missing=tuple(sorted(missing)))
    return CellResult(op, NO_DTYPE, "errors", OK_KERNEL, ran=len(errs))


def _schema(op: str) -> OpSchema:
    return next(s for s in api.plugins().ops if s.name == op)


def _first_of(log: list[tuple[str, str, str]], op: str) -> int:
    """Index of the op's own dispatch in a sample's log (inputs and checks dispatch ops of their own)."""
    return next((i for i, (name, _, _) in enumerate(log) if name == op), len(log))


def _broken(base: CellResult, why: str) -> CellResult:
    return CellResult(base.op, base.dtype, base.check, FAIL, worst=Mismatch(why), detail=why)

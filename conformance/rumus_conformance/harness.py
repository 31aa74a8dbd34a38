"""Running one op sample on the backend under test and comparing with the float64 reference."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

import rumus
from rumus import backend_api as api
from rumus.backend_api import from_storage
from rumus_contracts import (
    NEEDS_PACKED_STORAGE, BackendUnavailable, DType, ErrorSample, KernelNotFound, OpSchema, Sample, config,
    float64, parse_dtype,
)

from .outcomes import Mismatch
from .tolerances import forward_tolerance, gradient_tolerance


def backend_name() -> str:
    return config.text("RUMUS_BACKEND").split(":")[0]


@dataclass(frozen=True)
class Claim:
    op: str
    dtype: DType
    status: str  # "claimed", "missing" (backend has the dtype, op lacks a kernel), "unsupported" (no such dtype)


def _backend_dtypes(name: str) -> tuple[DType, ...] | None:
    try:
        be = api.backend(name)
        dtypes: tuple[DType, ...] = be.capabilities(be.devices()[0]).dtypes
        return dtypes
    except BackendUnavailable:
        return None


def claims(name: str | None = None) -> list[Claim]:
    """What the backend claims for every registered op and each dtype the op is defined for. A kernel
    registered with dtypes=None claims only the dtypes the backend holds (its capabilities)."""
    name = name or backend_name()
    reg = api.plugins()
    caps = _backend_dtypes(name) or ()
    holds_packed = any(d.is_packed for d in caps)
    out = []
    for schema in reg.ops:
        for dtype in schema.dtypes:
            if schema.name in NEEDS_PACKED_STORAGE and not holds_packed \
                    and reg.kernels.claiming_entry(schema.name, name, dtype, caps) is None:
                status = "unsupported"  # packed formats on a backend that holds none: not a gap
            elif schema.composite:
                status = "claimed" if dtype in caps else "unsupported"
            elif reg.kernels.claiming_entry(schema.name, name, dtype, caps) is not None:
                status = "claimed"
            elif dtype in caps or dtype.is_packed and any(
                    e.dtypes and any(d.is_packed for d in e.dtypes) for e in reg.kernels.entries(schema.name, name)):
                status = "missing"
            else:
                status = "unsupported"
            out.append(Claim(schema.name, dtype, status))
    return out


# ---- building inputs -------------------------------------------------------------------------------

def _host_for(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """Sample values as the dtype under test can hold them (ints truncate, unsigned take |x|)."""
    if dtype.is_bool:
        return np.asarray(arr != 0)
    if dtype.is_integer:
        vals = np.trunc(np.abs(arr) if dtype.kind == "u" else arr)
        info = np.iinfo(cast(Any, dtype.numpy))  # DType.numpy is typed loosely
        return np.asarray(np.clip(vals, info.min, info.max).astype(dtype.numpy))
    return arr


def input_dtype(arr: np.ndarray, dtype: DType, explicit: DType | None) -> DType:
    if explicit is not None:
        return explicit
    if arr.dtype == np.float64:
        return dtype
    if arr.dtype == np.bool_:
        return parse_dtype("bool")
    return parse_dtype("int64")


def make_input(arr: Any, dtype: DType, explicit: DType | None, device: str, noncontiguous: bool) -> rumus.Tensor:
    arr = np.asarray(arr)
    dt = input_dtype(arr, dtype, explicit)
    if explicit is not None and dt.is_packed:
        host = arr
        if noncontiguous and arr.ndim >= 1 and arr.size > 1:
            big = np.stack([np.zeros_like(arr), arr], axis=-1)
            return from_storage(big, dt, device)[..., 1]
        return from_storage(host, dt, device)
    host = _host_for(arr, dt) if arr.dtype == np.float64 else arr
    if noncontiguous and host.ndim >= 1 and host.size > 1:
        # every other element of a wider buffer, starting at offset 1: strided and offset
        big = np.stack([np.zeros_like(host), host], axis=-1)
        return rumus.tensor(big, dtype=dt, device=device)[..., 1]
    return rumus.tensor(host, dtype=dt, device=device)


def as_float64(t: rumus.Tensor) -> np.ndarray:
    if t.dtype.is_fixed:
        return t.fixed_i16_data()
    if t.dtype.kind == "q":  # q8 / int4 words have no float view: the reference reads them raw
        return api.backend(t.device.backend).to_numpy(t._arg)
    arr = t.numpy()
    return arr if arr.dtype == np.bool_ or t.dtype.is_integer else arr.astype(np.float64)


def spelled_out(schema: OpSchema, sample: Any) -> tuple[OpSchema, Any]:
    """A multi-tensor op's Sample or ErrorSample (its variadic input a list, with a list of dtypes or one
    dtype for it) as plain inputs, with the op's schema for that many (OpSchema.flat); other ops' unchanged."""
    v = schema.variadic
    if v is None:
        return schema, sample
    flat, inputs = schema.flatten(sample.inputs)
    dtypes: list[Any] | None = None
    pinned: Sequence[Any] | None = sample.dtypes
    if pinned:
        given: Any = pinned[v]
        many: list[Any] = list(given) if isinstance(given, (list, tuple)) else [given] * len(sample.inputs[v])
        dtypes = [*pinned[:v], *many, *pinned[v + 1:]]
    return flat, replace(sample, inputs=inputs, dtypes=dtypes)


def _as_called(flat: OpSchema, tensors: list[rumus.Tensor]) -> list[Any]:
    """The tensors as the op is called: a multi-tensor op's spelled-out list regrouped."""
    schema = rumus.ops.get(flat.name).schema
    return tensors if schema.variadic is None else schema.group(tensors)


def skip_reason(schema: OpSchema, sample: Sample, dtype: DType, caps: Sequence[DType]) -> str | None:
    """A sample this backend cannot run for a reason other than a missing kernel (e.g. no int64 at all)."""
    for i, arr in enumerate(sample.inputs):
        explicit = sample.dtypes[i] if sample.dtypes else None
        dt = input_dtype(np.asarray(arr), dtype, explicit)
        if dt not in caps and not dt.is_packed:
            return f"input {i} needs dtype {dt}, which this backend does not hold"
    target = sample.attrs.get("dtype")
    if target is not None and parse_dtype(target) not in caps:
        return f"target dtype {target} is not held by this backend"
    return None


def prepare_attrs(schema: OpSchema, sample: Sample, dtype: DType) -> dict[str, Any]:
    attrs = dict(sample.attrs)
    if not schema.inputs and "dtype" in schema.attrs:
        attrs["dtype"] = dtype.name  # creation ops: the dtype under test is the output's
    return attrs


@dataclass
class Outcome:
    outputs: list[np.ndarray]
    inputs_after: list[np.ndarray]
    ref_inputs: list[np.ndarray]
    out_dtypes: list[DType]
    in_dtypes: list[DType]


def run(schema: OpSchema, sample: Sample, dtype: DType, device: str, noncontiguous: bool) -> Outcome:
    explicit = list(sample.dtypes) if sample.dtypes else [None] * len(sample.inputs)
    # inputs an in-place kernel writes must be contiguous (the dispatcher refuses others): only the
    # read-only inputs get the strided variant
    tensors = [make_input(a, dtype, e, device, noncontiguous and i not in schema.mutates_idx)
               for i, (a, e) in enumerate(zip(sample.inputs, explicit))]
    ref_inputs = [as_float64(t) for t in tensors]
    attrs = prepare_attrs(schema, sample, dtype)
    if not tensors:
        attrs["device"] = device
    outs = list(rumus.ops.call(schema.name, *_as_called(schema, tensors), **attrs))
    return Outcome([as_float64(o) for o in outs], [as_float64(t) for t in tensors], ref_inputs,
                   [o.dtype for o in outs], [t.dtype for t in tensors])


def reference(schema: OpSchema, sample: Sample, dtype: DType, ref_inputs: list[np.ndarray]) -> list[np.ndarray]:
    assert schema.reference is not None, f"op '{schema.name}' has no reference"
    attrs = prepare_attrs(schema, sample, dtype)
    if not schema.inputs:
        res = schema.reference(**attrs)
    else:
        ins = [a if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer) and sample.dtypes else
               a.astype(np.float64) if a.dtype != np.bool_ else a for a in ref_inputs]
        res = schema.reference(*ins, **attrs)
    return [np.asarray(r) for r in (res if isinstance(res, tuple) else (res,))]


def compare(name: str, got: np.ndarray, want: np.ndarray, out_dtype: DType, rtol: float, atol: float) -> str | None:
    """None when equal within tolerance, else a message with the worst element."""
    bad = mismatch(name, got, want, out_dtype, rtol, atol)
    return bad.message if bad else None


def mismatch(name: str, got: np.ndarray, want: np.ndarray, out_dtype: DType, rtol: float,
             atol: float) -> Mismatch | None:
    """None when equal within tolerance, else the worst element: its errors and how far past the
    tolerance it is (the ratio failures are ranked by)."""
    want = np.asarray(want)
    if got.shape != want.shape:
        return Mismatch(f"{name}: shape {got.shape}, expected {want.shape}")
    if out_dtype.is_bool or not out_dtype.is_floating:
        # integer results wrap around like C (and PyTorch) do: compare in the output's own dtype
        cast = want.astype(bool) if out_dtype.is_bool else np.asarray(want).astype(np.int64).astype(out_dtype.numpy)
        g = got.astype(bool) if out_dtype.is_bool else got.astype(out_dtype.numpy)
        if not np.array_equal(g, cast):
            wrong = g != cast
            gap = np.abs(g.astype(np.float64) - cast.astype(np.float64))
            idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(wrong, gap, -1.0))), g.shape))
            return Mismatch(f"{name}: {int(wrong.sum())} of {wrong.size} elements differ; worst at {idx}: got "
                            f"{g[idx].item()}, expected {cast[idx].item()} (exact)", math.inf, float(gap[idx]), None)
        return None
    want = want.astype(np.float64)
    same = (np.isnan(got) & np.isnan(want)) | (got == want)  # equal infinities too (inf - inf is NaN)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want))
    bound = atol + rtol * np.abs(want)
    bad = ~((diff <= bound) | same)
    if bad.any():
        with np.errstate(invalid="ignore", divide="ignore"):
            # NaN where a number was due (or the reverse) is as wrong as it gets
            excess = np.where(bad, np.nan_to_num(diff / bound, nan=np.inf, posinf=np.inf), -1.0)
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), excess.shape))
        err, ref = float(diff[idx]), float(want[idx])
        rel = err / abs(ref) if ref != 0 and math.isfinite(ref) else None
        rel_text = f", rel {rel:.3g}" if rel is not None else ""
        return Mismatch(f"{name}: {int(bad.sum())} of {bad.size} elements differ; worst at {idx}: got "
                        f"{float(got[idx])!r}, expected {ref!r} (abs error {err:.3g}{rel_text}; "
                        f"rtol {rtol}, atol {atol})",
                        float(excess[idx]), err, rel)
    return None


def check_forward(schema: OpSchema, sample: Sample, dtype: DType, device: str, noncontiguous: bool) -> str | None:
    bad = judge_forward(schema, sample, dtype, device, noncontiguous)
    return bad.message if bad else None


def judge_forward(schema: OpSchema, sample: Sample, dtype: DType, device: str,
                  noncontiguous: bool) -> Mismatch | None:
    """One sample's forward result (or in-place update) against the float64 reference."""
    res = run(schema, sample, dtype, device, noncontiguous)
    want = reference(schema, sample, dtype, res.ref_inputs)
    rtol, atol = forward_tolerance(schema, dtype)
    if schema.inplace:
        for i in schema.mutates_idx:
            # a float input of its own dtype (a multi-tensor op's float16 gradient) is judged in that dtype
            idt = res.in_dtypes[i] if res.in_dtypes[i].is_floating else dtype
            rtol, atol = forward_tolerance(schema, idt)
            bad = mismatch(f"{schema.inputs[i]} (updated in place)", res.inputs_after[i], want[i], idt, rtol, atol)
            if bad:
                return bad
        return None
    if len(want) != len(res.outputs):
        return Mismatch(f"{len(res.outputs)} outputs, reference has {len(want)}")
    for k, (got, w, odt) in enumerate(zip(res.outputs, want, res.out_dtypes)):
        bad = mismatch(f"output {k}", got, w, odt, *((rtol, atol) if odt.is_floating else (0.0, 0.0)))
        if bad:
            return bad
    return None


def _finite_difference(fn: Callable[[list[np.ndarray]], np.ndarray], inputs: list[np.ndarray], i: int,
                       cot: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x = inputs[i]
    grad = np.zeros_like(x, dtype=np.float64)
    flat = grad.reshape(-1)
    for j in range(x.size):
        plus = [a.copy() for a in inputs]
        minus = [a.copy() for a in inputs]
        plus[i].reshape(-1)[j] += eps
        minus[i].reshape(-1)[j] -= eps
        flat[j] = (np.sum(fn(plus) * cot) - np.sum(fn(minus) * cot)) / (2 * eps)
    return grad


def check_gradient(schema: OpSchema, sample: Sample, dtype: DType, device: str, noncontiguous: bool) -> str | None:
    bad = judge_gradient(schema, sample, dtype, device, noncontiguous)
    return bad.message if bad else None


def judge_gradient(schema: OpSchema, sample: Sample, dtype: DType, device: str,
                   noncontiguous: bool) -> Mismatch | None:
    """One sample's gradients (backward of a random cotangent) against central finite differences."""
    explicit = list(sample.dtypes) if sample.dtypes else [None] * len(sample.inputs)
    tensors = [make_input(a, dtype, e, device, noncontiguous) for a, e in zip(sample.inputs, explicit)]
    diff_idx = [i for i in schema.differentiable_idx if tensors[i].dtype.is_floating]
    for i in diff_idx:
        tensors[i] = tensors[i].detach().requires_grad_(True)
    ref_inputs = [as_float64(t) for t in tensors]
    attrs = prepare_attrs(schema, sample, dtype)
    (out,) = rumus.ops.call(schema.name, *tensors, **attrs)
    rng = np.random.default_rng(1234)
    cot_t = rumus.tensor(rng.uniform(-1, 1, out.shape), dtype=out.dtype, device=device)
    cot = as_float64(cot_t)  # the cotangent as the backend holds it (rounded in float16/bfloat16)
    out.backward(cot_t)

    def fn(ins: list[np.ndarray]) -> np.ndarray:
        return np.asarray(reference(schema, sample, dtype, ins)[0], dtype=np.float64)

    rtol, atol = gradient_tolerance(schema, dtype)
    for i in diff_idx:
        want = _finite_difference(fn, ref_inputs, i, cot)
        grad = tensors[i].grad
        if grad is None:
            if np.allclose(want, 0):
                continue
            return Mismatch(f"input '{schema.inputs[i]}' got no gradient")
        bad = mismatch(f"d/d{schema.inputs[i]}", as_float64(grad), want, dtype, rtol, atol)
        if bad:
            return bad
    return None


def check_error(schema: OpSchema, err: ErrorSample, device: str) -> str | None:
    schema, err = spelled_out(schema, err)
    explicit = list(err.dtypes) if err.dtypes else [None] * len(err.inputs)
    default = parse_dtype("float32")
    tensors = [make_input(a, default, e, device, False) for a, e in zip(err.inputs, explicit)]
    try:
        rumus.ops.call(schema.name, *_as_called(schema, tensors), **dict(err.attrs))
    except err.error as exc:
        if err.match and err.match not in str(exc):
            return f"raised {type(exc).__name__} but the message {str(exc)!r} lacks {err.match!r}"
        return None
    except KernelNotFound:
        raise  # not a wrong error: a kernel the check needs is missing (the cell is MISSING, naming it)
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}, expected {err.error.__name__}"
    return f"accepted bad input; expected {err.error.__name__}"


_ = float64


def needs_unheld_packed(op: str, name: str | None = None) -> bool:
    """Whether op works on packed storage (q8 / int4 / fixed_i16) that the backend does not hold."""
    caps = _backend_dtypes(name or backend_name()) or ()
    return op in NEEDS_PACKED_STORAGE and not any(d.is_packed for d in caps)

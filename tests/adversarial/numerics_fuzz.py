"""A seeded numerics fuzz of every elementwise op of the expression table, clamp and the scans, against
float64 references, edge values included, on the default backend (RUMUS_BACKEND).

Inputs: a fixed set of float32 edge values (signed zeros, infinities, NaN, subnormals, the smallest
normal, tiny and huge magnitudes, exp's and float32's overflow and underflow thresholds, half-integers)
crossed with each other for binary ops, plus seeded random values of every magnitude. The reference is
PyTorch in float64 on the same (already rounded) inputs, rounded once to the op's dtype; the fused
backward ops' reference is their expression evaluated by numpy in float64 (expr_numpy), which the
conformance suite proves against finite differences.

A result agrees with its reference when:
- it is NaN exactly where the reference is, and the same infinity where the reference is one;
- a zero has the reference's sign where PyTorch documents it (C99's signed-zero rules of abs, neg, the
  rounding ops, fmod/remainder/floor_divide, atan2, pow, copies);
- a nonzero normal reference did not become 0 (no flush of a normal result);
- |got - want| <= rtol |want| + atol min(1, m), with (rtol, atol) the dtype's forward tolerance
  (conformance/rumus_conformance/tolerances.py) and m the largest finite input magnitude of that element:
  below 1 the absolute allowance shrinks with the input, so a small-argument form (tanh, log1p, expm1, erf,
  sin at 1e-10) must be relatively accurate; pow also allows |y log x| 2^-22 relative, the rounding of the
  product y log x that exp(y log x) magnifies (as in any float32 pow that has no wider log); a subnormal
  reference is compared to 2^-10 of the smallest normal (its own precision is that of its few bits).
A result that misses the float64 reference still agrees when it meets the same rule against the op
computed in the dtype itself (PyTorch on float32 tensors; numpy on float32 arrays for the fused backward
ops): it is then as good as PyTorch in that dtype (gelu(-7.5) is 0 in float32 PyTorch too, and
0 * exp(89) is NaN in any float32 evaluation).
Subnormal inputs are read as zero on a device that flushes them (Vulkan lets an implementation flush
float32 subnormals on input; lavapipe does): there the reference is taken on the flushed inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import rumus as rm
import rumus.ops as O
from rumus_conformance.tolerances import FORWARD
from rumus_contracts.ops.expr_numpy import evaluator
from rumus_contracts.ops.expressions import EXPRESSIONS, backward_ops

EDGES = np.array([
    0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-40, -1e-40, 1.1754944e-38, 1e-30, 1e-10, -1e-10,
    1e-7, -1e-7, 1e-3, 0.003, 0.5, -0.5, 0.7, 2.0, -2.0, 3.0, 7.5, -7.5, 15.5, 20.0, -20.0, 88.0, -88.0, 88.7,
    89.0, -103.0, -104.0, 1e5, 1e10, -1e10, 3e38, -3e38,
], dtype=np.float32)

# torch's name where it is not the op's own (functional ops by name otherwise)
_TORCH_NAMES = {"gelu_tanh": ("gelu", {"approximate": "tanh"}), "leaky_relu": ("leaky_relu", {}),
                "softplus": ("softplus", {}), "elu": ("elu", {}), "celu": ("celu", {}), "selu": ("selu", {}),
                "softsign": ("softsign", {}), "mish": ("mish", {}), "hardswish": ("hardswish", {}),
                "hardsigmoid": ("hardsigmoid", {}), "logsigmoid": ("logsigmoid", {}), "silu": ("silu", {}),
                "gelu": ("gelu", {}), "tanhshrink": ("tanhshrink", {})}
# ops whose zero results carry a sign PyTorch keeps (C99 / IEEE 754 signed zeros)
SIGNED_ZERO = {"neg", "abs", "floor", "ceil", "round", "trunc", "fmod", "remainder", "floor_divide", "atan2",
               "pow", "mul", "div", "sqrt", "sin", "tanh", "expm1", "log1p", "erf", "reciprocal", "relu",
               "clamp", "cumsum", "cumprod", "sign", "square", "maximum", "minimum"}


@dataclass(frozen=True)
class Mismatch:
    op: str
    dtype: str
    kind: str  # nan, inf, zero sign, flushed, precision
    inputs: tuple[float, ...]
    got: float
    want: float
    at: int  # the element's index


def _torch_fn(name: str) -> Callable[..., Any]:
    import torch
    import torch.nn.functional as TF
    if name in _TORCH_NAMES:
        fn_name, kw = _TORCH_NAMES[name]
        return lambda *a: getattr(TF, fn_name)(*a, **kw)
    return getattr(torch, name)


def _flushes_subnormals() -> bool:
    """Whether the default backend reads float32 subnormal inputs as zero (as lavapipe does)."""
    x = rm.tensor(np.array([1e-40], np.float32))
    return bool(rm.mul(x, 1.0).numpy()[0] == 0)


def _inputs(arity: int, rng: np.random.Generator) -> list[np.ndarray]:
    rand = np.concatenate([rng.standard_normal(48) * 3, np.exp(rng.uniform(-40, 40, 48)) * rng.choice([-1, 1], 48),
                           rng.integers(-6, 7, 24).astype(np.float64)]).astype(np.float32)
    if arity == 1:
        return [np.concatenate([EDGES, rand])]
    a, b = np.meshgrid(EDGES, EDGES)
    return [np.concatenate([a.ravel(), rand]), np.concatenate([b.ravel(), rng.permutation(rand)])]


def _flush(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(x.dtype)


def compare(op: str, dtype: str, xs: list[np.ndarray], got: np.ndarray, want: np.ndarray,
            boolean: bool) -> list[Mismatch]:
    """The mismatches of got (the backend, as float64) against want (the float64 reference rounded to dtype)."""
    out: list[Mismatch] = []
    rtol, atol = FORWARD[dtype]
    fin_in = np.stack([np.where(np.isfinite(x), np.abs(x.astype(np.float64)), 0.0) for x in xs]).max(axis=0)
    scale = np.minimum(1.0, fin_in)
    if op == "pow":
        with np.errstate(all="ignore"):
            cond = np.abs(xs[1].astype(np.float64) * np.log(np.abs(xs[0].astype(np.float64))))
        rtol_el = rtol + np.where(np.isfinite(cond), cond, 0.0) * 2.0 ** -22
    else:
        rtol_el = np.full(got.shape, rtol)
    tiny = float(np.finfo(np.float16 if dtype == "float16" else np.float32 if dtype != "float64" else np.float64).tiny)
    floor = tiny * 2.0 ** -10
    for i in range(got.size):
        g, w = float(got.flat[i]), float(want.flat[i])
        kind = None
        if boolean:
            kind = None if g == w else "boolean"
        elif math.isnan(w) or math.isnan(g):
            kind = None if math.isnan(w) and math.isnan(g) else "nan"
        elif math.isinf(w) or math.isinf(g):
            kind = None if g == w else "inf"
        elif w == 0 and g == 0:
            kind = "zero sign" if op in SIGNED_ZERO and math.copysign(1, g) != math.copysign(1, w) else None
        elif g == 0 and abs(w) >= tiny:
            kind = "flushed"
        elif abs(g - w) > rtol_el.flat[i] * abs(w) + atol * scale.flat[i] + floor:
            kind = "precision"
        if kind is not None:
            out.append(Mismatch(op, dtype, kind, tuple(float(x.flat[i]) for x in xs), g, w, i))
    return out


def _run(op: str, dtype: str, xs: list[np.ndarray], flush: bool, ref: Callable[..., Any],
         ours: Callable[..., Any], boolean: bool, ref_same: Callable[..., Any]) -> list[Mismatch]:
    """ref: the float64 reference over float64 arrays; ref_same: the op in the dtype itself."""
    np_dtype = {"float32": np.float32, "float64": np.float64, "float16": np.float16}[dtype]
    with np.errstate(all="ignore"):
        xs = [x.astype(np_dtype) for x in xs]
    ref_in = [_flush(x) if flush and dtype == "float32" else x for x in xs]
    with np.errstate(all="ignore"):
        want = np.asarray(ref(*[x.astype(np.float64) for x in ref_in]), dtype=np.float64)
        if not boolean:
            want = want.astype(np_dtype).astype(np.float64)
    got = np.asarray(ours(*[rm.tensor(x, dtype=dtype) for x in xs]).numpy(), dtype=np.float64)
    missed = compare(op, dtype, ref_in, got, want, boolean)
    if not missed:
        return missed
    with np.errstate(all="ignore"):
        same = np.asarray(ref_same(*ref_in), dtype=np.float64)
    worse = {m.at for m in compare(op, dtype, ref_in, got, same, boolean)}
    return [m for m in missed if m.at in worse]


def _torch_ref(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(the float64 reference, the op in the inputs' own dtype), both PyTorch's."""
    import torch
    fn = _torch_fn(name)
    return (lambda *a: fn(*[torch.tensor(x, dtype=torch.float64) for x in a]).double().numpy(),
            lambda *a: fn(*[torch.tensor(x) for x in a]).double().numpy())


def dtypes_here() -> list[str]:
    """The float dtypes the default backend computes (float64 only where it has kernels for it)."""
    out = ["float32", "float16"]
    try:
        rm.add(rm.tensor([1.0], dtype="float64"), 1.0)
        out.insert(1, "float64")
    except rm.RumusError:
        pass
    return out


def fuzz(seed: int = 33) -> Iterator[tuple[str, list[Mismatch]]]:
    """(a label per op and dtype, its mismatches) for every case class of the fuzz."""
    rng = np.random.default_rng(seed)
    flush = _flushes_subnormals()
    for dtype in dtypes_here():
        for name, e in EXPRESSIONS.items():
            if e.dtypes not in ("float", "signed", "numeric", "all"):
                continue
            xs = _inputs(len(e.inputs), rng)
            yield f"{name} {dtype}", _run(name, dtype, xs, flush, *_torch_ref(name)[:1], O.get(name),
                                         e.result == "bool", _torch_ref(name)[1])
        xs = _inputs(1, rng)
        for lo, hi in ((0.0, 0.5), (-1.0, None), (None, 2.0)):
            import torch
            yield f"clamp({lo}, {hi}) {dtype}", _run(
                "clamp", dtype, xs, flush,
                lambda x, lo=lo, hi=hi: torch.clamp(torch.tensor(x), lo, hi).numpy(),
                lambda x, lo=lo, hi=hi: rm.clamp(x, lo, hi), False,
                lambda x, lo=lo, hi=hi: torch.clamp(torch.tensor(x), lo, hi).double().numpy())
        if dtype == "float32":
            for name, (_, _, e) in backward_ops().items():
                # the op's inputs from the edges and random values, the incoming gradient g of moderate size
                xs = _inputs(len(e.inputs) - 1, rng)
                g = rng.choice(np.array([1.0, -1.0, 0.5, -3.0, 0.0, 1.5], np.float32), xs[0].size)
                f = evaluator(e)
                yield f"{name} {dtype}", _run(name, dtype, [g, *xs], flush,
                                             lambda *a, f=f, p=dict(e.params): f(*a, **p), O.get(name), False,
                                             lambda *a, f=f, p=dict(e.params): f(*a, **p))
    yield from _scans(rng, flush)


def _scans(rng: np.random.Generator, flush: bool) -> Iterator[tuple[str, list[Mismatch]]]:
    """Rows of edge values and of mixed magnitudes, scanned along either dim. PyTorch's CPU accumulates a
    float32 scan in float64; a float32 accumulation (PyTorch's CUDA, the wgpu backend) is compared to
    the float32 sequential scan, the order being what matters."""
    import torch
    wide = rm.tensor([1.0, 1e8, -1e8, 1.0]).device.backend == "cpu"
    for name in ("cumsum", "cumprod"):
        rows = [EDGES[rng.permutation(EDGES.size)[:12]] for _ in range(8)]
        rows += [(rng.standard_normal(12) * 10.0 ** rng.integers(-8, 9, 12)).astype(np.float32) for _ in range(8)]
        rows += [rng.uniform(0.5, 2.0, 12).astype(np.float32) for _ in range(4)]
        x = np.stack(rows)
        xin = _flush(x) if flush else x
        for dim in (0, 1):
            if wide:
                want = getattr(torch, name)(torch.tensor(xin), dim).double().numpy()
            else:
                t = torch.tensor(xin)
                want = getattr(torch, name)(t.double(), dim).numpy()
                seq = np.zeros_like(xin)
                acc = np.zeros(xin.shape[1 - dim], np.float32) + (0 if name == "cumsum" else 1)
                with np.errstate(all="ignore"):
                    for k in range(xin.shape[dim]):
                        sl = (slice(None), k) if dim == 1 else (k, slice(None))
                        acc = (acc + xin[sl]) if name == "cumsum" else (acc * xin[sl])
                        seq[sl] = acc
                want = seq.astype(np.float64)
            got = getattr(rm, name)(rm.tensor(x), dim).numpy().astype(np.float64)
            cols = [np.broadcast_to(xin, got.shape)]
            yield f"{name} dim {dim} float32", compare(name, "float32", cols, got, want.astype(np.float32)
                                                       .astype(np.float64), False)

"""Fused optimizer steps: in-place kernels, one launch per parameter (PyTorch's update rules).

adam_step takes its step count as a host attribute. adam_step_dev_ is the form a GradScaler step uses
(PyTorch's capturable=True with found_inf): the count and the skip flag are float32 device tensors, so
the host never reads whether a step was skipped, and adam_step_count_ advances every count of one
optimizer step afterwards, in one call (a GPU dispatch cannot safely both read and advance a count that
all its workgroups read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, float32, float64, int64
from ..errors import DTypeError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape


def _same_shapes(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        if any(tuple(s) != tuple(shapes[0]) for s in shapes):
            raise ShapeError(f"{op}: parameter and state shapes differ: {[tuple(s) for s in shapes]}")
        return []
    return rule


def _adam_math(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, vmax: np.ndarray | None, lr: float,
               beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
               step: float) -> tuple[np.ndarray, ...]:
    """PyTorch's Adam/AdamW at count `step` (amsgrad when vmax, the running maximum of exp_avg_sq, is given):
    (param, effective grad, exp_avg, exp_avg_sq, the new maximum or v)."""
    if weight_decay and decoupled:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    most = v if vmax is None else np.maximum(vmax, v)
    bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
    p = p - (lr / bc1) * m / (np.sqrt(most) / np.sqrt(bc2) + eps)
    return p, g, m, v, most


def adam_reference(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, beta1: float,
                   beta2: float, eps: float, weight_decay: float, decoupled: bool,
                   step: int) -> tuple[np.ndarray, ...]:
    return _adam_math(p, g, m, v, None, lr, beta1, beta2, eps, weight_decay, decoupled, step)[:4]


def sgd_reference(p: np.ndarray, g: np.ndarray, buf: np.ndarray, lr: float, momentum: float,
                  dampening: float, weight_decay: float, nesterov: bool, first: bool) -> tuple[np.ndarray, ...]:
    p, buf = p.copy(), buf.copy()
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        buf = g.copy() if first else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    return p - lr * g, g, buf


def _one_element(op: str, shapes: Sequence[Shape], names: Sequence[str]) -> None:
    for name, s in zip(names, shapes):
        if int(np.prod(s)) != 1:
            raise ShapeError(f"{op}: '{name}' must hold one element, got shape {tuple(s)}")


def _adam_dev_shapes(shapes: Sequence[Any], attrs: Mapping[str, Any]) -> list[Shape]:
    p, g, m, v, vmax, step, flag = shapes
    if len(vmax) > 1:
        raise ShapeError(f"adam_step_dev_: max_exp_avg_sq holds one tensor (amsgrad) or none, got {len(vmax)}")
    _same_shapes("adam_step_dev_")([p, g, m, v, *vmax], attrs)
    _one_element("adam_step_dev_", (step, flag), ("step", "found_inf"))
    return []


def _adam_dev_dtypes(dtypes: Sequence[Any], attrs: Mapping[str, Any]) -> list[DType]:
    p, g, m, v, vmax, step, flag = dtypes
    if any(d != p for d in (g, m, v, *vmax)):
        raise DTypeError(f"adam_step_dev_: param, grad and state must share one dtype, got "
                         f"{[d.name for d in (p, g, m, v, *vmax)]}")
    if step != float32 or flag != float32:
        raise DTypeError(f"adam_step_dev_: step and found_inf must be float32, got {step} and {flag}")
    return []


def adam_dev_reference(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, vmax: list[np.ndarray],
                       step: np.ndarray, found_inf: np.ndarray, lr: float, beta1: float, beta2: float, eps: float,
                       weight_decay: float, decoupled: bool, maximize: bool) -> tuple[Any, ...]:
    """Nothing changes when found_inf != 0; otherwise PyTorch's Adam/AdamW (amsgrad when vmax holds the
    running maximum) at step count step + 1. The count itself is left to adam_step_count_."""
    if found_inf.reshape(()) != 0:
        return p.copy(), g, m.copy(), v.copy(), [x.copy() for x in vmax], step.copy(), found_inf
    t = float(step.reshape(())) + 1
    p, g, m, v, most = _adam_math(p, -g if maximize else g, m, v, vmax[0] if vmax else None, lr, beta1, beta2, eps,
                                  weight_decay, decoupled, t)
    return p, g, m, v, [most] if vmax else [], step.copy(), found_inf


def step_count_reference(steps: list[np.ndarray], found_inf: np.ndarray) -> tuple[Any, ...]:
    taken = found_inf.reshape(()) == 0
    return [s + 1 if taken else s.copy() for s in steps], found_inf


def _adam_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape in ((3, 4), (1,), (0,), (37,)):
        for wd, dec, step in ((0.0, False, 1), (0.01, True, 3), (0.1, False, 10)):
            arrays = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape), rng.uniform(-0.1, 0.1, shape),
                      rng.uniform(0, 0.01, shape)]
            out.append(Sample(arrays, {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                       "weight_decay": wd, "decoupled": dec, "step": step},
                              grad=False, name=f"{shape}/wd{wd}/{'adamw' if dec else 'adam'}/t{step}"))
    return out


def _sgd_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape in ((3, 4), (0,), (29,)):
        for mom, damp, wd, nest, first in ((0.0, 0.0, 0.0, False, True), (0.9, 0.0, 0.0, False, True),
                                           (0.9, 0.1, 0.01, False, False), (0.9, 0.0, 0.01, True, False)):
            arrays = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)]
            out.append(Sample(arrays, {"lr": 0.1, "momentum": mom, "dampening": damp, "weight_decay": wd,
                                       "nesterov": nest, "first": first}, grad=False,
                              name=f"{shape}/m{mom}/d{damp}/wd{wd}/n{nest}/f{first}"))
    return out


_F32 = float32


def _adam_dev_samples(rng: np.random.Generator) -> list[Sample]:
    """Skipped (1.0, and a NaN flag) and taken steps, first and later counts, amsgrad, maximize, both
    weight decays; step and found_inf stay float32 whatever the parameter's dtype."""
    out = []
    cases = ((0.0, False, False, 0.0, False, 0.0), (0.01, True, False, 2.0, False, 0.0),
             (0.1, False, True, 9.0, False, 0.0), (0.01, True, True, 0.0, True, 0.0),
             (0.0, False, True, 4.0, False, 1.0), (0.01, True, False, 3.0, True, 1.0),
             (0.1, False, False, 5.0, False, np.nan), (0.0, False, False, 1e5, False, 0.0))
    for shape in ((3, 4), (1,), (0,), (37,)):
        for wd, dec, ams, step, maximize, flag in cases:
            arrays = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape), rng.uniform(-0.1, 0.1, shape),
                      rng.uniform(0, 0.01, shape)]
            vmax = [arrays[3] + rng.uniform(0, 0.01, shape) * (rng.uniform(size=shape) < 0.5)] if ams else []
            out.append(Sample([*arrays, vmax, np.array(step), np.array(flag)],
                              {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": wd,
                               "decoupled": dec, "maximize": maximize}, grad=False,
                              dtypes=[None, None, None, None, None, _F32, _F32],
                              name=f"{shape}/wd{wd}/{'adamw' if dec else 'adam'}/ams{ams}/t{step}/max{maximize}"
                                   f"/inf{flag}"))
    arrays = [rng.uniform(-1, 1, (5,)) for _ in range(4)]
    out.append(Sample([*arrays[:3], np.abs(arrays[3]), [], np.array(0.0), np.array(0.0)],
                      {"lr": 0.1, "beta1": 0.0, "beta2": 0.0, "eps": 1e-6, "weight_decay": 0.0, "decoupled": False,
                       "maximize": False}, grad=False, dtypes=[None, None, None, None, None, _F32, _F32],
                      name="betas 0 (no bias correction)"))
    return out


def _adam_dev_errors() -> list[ErrorSample]:
    ok = [np.ones(3), np.ones(3), np.zeros(3), np.zeros(3)]
    pin = [None, None, None, None, None, _F32, _F32]
    return [ErrorSample([*ok, [], np.zeros(2), np.zeros(())], {}, ShapeError, "'step' must hold one", dtypes=pin),
            ErrorSample([*ok, [np.zeros(3), np.zeros(3)], np.zeros(()), np.zeros(())], {}, ShapeError,
                        "one tensor (amsgrad) or none", dtypes=pin),
            ErrorSample([*ok, [np.zeros(4)], np.zeros(()), np.zeros(())], {}, ShapeError, "shapes differ", dtypes=pin),
            ErrorSample([*ok, [], np.zeros(()), np.zeros(())], {}, DTypeError, "must be float32",
                        dtypes=[None, None, None, None, None, int64, _F32])]


def _count_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for flag in (0.0, 1.0, np.inf):
        counts = [np.array(float(k * 3)) for k in range(5)] + [np.array([7.0])]
        out.append(Sample([counts, np.array(flag)], {}, grad=False, name=f"6 counts/inf{flag}"))
    out.append(Sample([[np.array(float(k)) for k in range(40)], np.array(0.0)], {}, grad=False, name="40 counts"))
    out.append(Sample([[], np.array(0.0)], {}, grad=False, name="no counts"))
    return out


def _count_errors() -> list[ErrorSample]:
    return [ErrorSample([[np.zeros(2)], np.zeros(())], {}, ShapeError, "'steps[0]' must hold one"),
            ErrorSample([[np.zeros(())], np.zeros(())], {}, DTypeError, "float32", dtypes=_listed([float64]))]


def _listed(counts: list[DType]) -> Any:
    """A sample's `dtypes` pinning one dtype per count (a list in the variadic input's place)."""
    return [counts, None]


def _count_shapes(shapes: Sequence[Any], attrs: Mapping[str, Any]) -> list[Shape]:
    steps, flag = shapes
    _one_element("adam_step_count_", [*steps, flag], [*(f"steps[{k}]" for k in range(len(steps))), "found_inf"])
    return []


def _count_dtypes(dtypes: Sequence[Any], attrs: Mapping[str, Any]) -> list[DType]:
    steps, flag = dtypes
    if any(d != float32 for d in (*steps, flag)):
        raise DTypeError(f"adam_step_count_: step counts and found_inf must be float32, got "
                         f"{[d.name for d in (*steps, flag)]}")
    return []


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "adam_step", ("param", "grad", "exp_avg", "exp_avg_sq"), _same_shapes("adam_step"),
        attrs={"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
               "decoupled": False, "step": 1},
        dtype=lambda d, a: [], dtypes=(float32, float64), inplace=True, num_outputs=0,
        contiguous=("param", "grad", "exp_avg", "exp_avg_sq"), mutates=("param", "exp_avg", "exp_avg_sq"),
        volatile=("lr", "step"), reference=adam_reference,
        samples=_adam_samples,
        doc="one Adam/AdamW update in place on param, exp_avg, exp_avg_sq (grad is read only; "
            "the reference also returns the effective grad, which the suite ignores)"))
    registry.register(OpSchema(
        "adam_step_dev_", ("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq*", "step", "found_inf"),
        _adam_dev_shapes, dtype=_adam_dev_dtypes,
        attrs={"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, "decoupled": False,
               "maximize": False},
        dtypes=(float32, float64), inplace=True, num_outputs=0,
        contiguous=("param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq*", "step", "found_inf"),
        mutates=("param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq*"), volatile=("lr",),
        reference=adam_dev_reference, samples=_adam_dev_samples, error_samples=_adam_dev_errors,
        doc="one Adam/AdamW update in place, read from two float32 one-element device tensors: the step "
            "count (bias corrections from step + 1, computed on the device) and found_inf (not 0: nothing "
            "is written, the GradScaler's skipped step). max_exp_avg_sq: [] or [the amsgrad running maximum]. "
            "step itself is not advanced: adam_step_count_ does it once for all parameters of a step"))
    registry.register(OpSchema(
        "adam_step_count_", ("steps*", "found_inf"), _count_shapes, dtype=_count_dtypes, dtypes=(float32,),
        dispatch_on=1, inplace=True, num_outputs=0, contiguous=("steps*", "found_inf"), mutates=("steps*",),
        reference=step_count_reference, samples=_count_samples, error_samples=_count_errors,
        doc="every step count of a list += 1 unless found_inf != 0 (after adam_step_dev_ over the parameters "
            "they count): one call per optimizer step"))
    registry.register(OpSchema(
        "sgd_step", ("param", "grad", "momentum_buffer"), _same_shapes("sgd_step"),
        attrs={"lr": 1e-2, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
               "first": True},
        dtype=lambda d, a: [], dtypes=(float32, float64), inplace=True, num_outputs=0,
        contiguous=("param", "grad", "momentum_buffer"), mutates=("param", "momentum_buffer"),
        volatile=("lr", "first"), reference=sgd_reference, samples=_sgd_samples,
        doc="one SGD update (momentum, dampening, nesterov, weight decay) in place on param and "
            "momentum_buffer; first=True initialises the buffer to the gradient"))

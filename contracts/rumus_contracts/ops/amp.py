"""The loss scaler's device ops (rumus.amp.GradScaler): unscaling gradients with an inf/NaN check,
and the dynamic scale update — both in place on the device, so a training step never waits for the
host to read a flag (PyTorch's _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_).

The scaler's state is float32 0-d tensors: the scale, the number of clean steps since the last change
(exact in float32 up to 2**24), and a found-inf flag (0.0 or 1.0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, bfloat16, float16, float32, int64
from ..errors import DTypeError, ShapeError
from ..schema import ErrorSample, OpRegistry, OpSchema, Sample, Shape, ShapeRule


def _scalar_state(op: str, names: Sequence[str], first: int) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        for name, s in list(zip(names, shapes))[first:]:
            if int(np.prod(s)) != 1:
                raise ShapeError(f"{op}: '{name}' must hold one element, got shape {tuple(s)}")
        return []
    return rule


def unscale_check_reference(grad: np.ndarray, found_inf: np.ndarray,
                            inv_scale: np.ndarray) -> tuple[np.ndarray, ...]:
    with np.errstate(invalid="ignore", over="ignore"):
        out = grad * inv_scale.reshape(()) if grad.size else grad.copy()
    bad = bool((~np.isfinite(grad)).any())
    return out, np.maximum(found_inf, 1.0) if bad else found_inf.copy(), inv_scale


def unscale_check_multi_reference(grads: list[np.ndarray], found_inf: np.ndarray,
                                  inv_scale: np.ndarray) -> tuple[Any, ...]:
    """Every gradient unscaled; one flag for all of them."""
    outs, flag = [], found_inf
    for g in grads:
        out, flag, _ = unscale_check_reference(g, flag, inv_scale)
        outs.append(out)
    return outs, flag.copy(), inv_scale


_GRAD_DTYPES = (float32, float16, bfloat16)


def _multi_dtypes(dtypes: Sequence[Any], attrs: Mapping[str, Any]) -> list[DType]:
    grads, found_inf, inv_scale = dtypes
    for k, d in enumerate(grads):
        if d not in _GRAD_DTYPES:
            raise DTypeError(f"amp_unscale_check_multi_: grads[{k}] is {d.name}; gradients must be float32, float16 or "
                             f"bfloat16")
    if found_inf != float32 or inv_scale != float32:
        raise DTypeError(f"amp_unscale_check_multi_: found_inf and inv_scale must be float32, got {found_inf} and "
                         f"{inv_scale}")
    return []


_multi_shapes: ShapeRule = _scalar_state("amp_unscale_check_multi_", ("grads", "found_inf", "inv_scale"), 1)


def update_scale_reference(scale: np.ndarray, tracker: np.ndarray, found_inf: np.ndarray, growth_factor: float,
                           backoff_factor: float, growth_interval: int) -> tuple[np.ndarray, ...]:
    scale, tracker = scale.astype(np.float64).copy(), tracker.astype(np.float64).copy()
    if found_inf.reshape(()) != 0:
        scale *= backoff_factor
        tracker[...] = 0
    elif tracker.reshape(()) + 1 >= growth_interval:
        grown = scale * growth_factor
        # a scale that would overflow float32 stays where it is (PyTorch's rule)
        scale = np.where(np.abs(grown) <= np.finfo(np.float32).max, grown, scale)
        tracker[...] = 0
    else:
        tracker += 1
    return scale, tracker, found_inf


def _unscale_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape in ((3, 4), (0,), (1,), (257,), (2, 3, 5)):
        for bad, flag, inv in ((None, 0.0, 2.0 ** -16), (np.inf, 0.0, 0.5), (np.nan, 0.0, 1.0), (None, 1.0, 0.25),
                               (-np.inf, 1.0, 2.0 ** -10)):
            g = rng.uniform(-1e3, 1e3, shape)
            if bad is not None and g.size:
                g.reshape(-1)[rng.integers(g.size)] = bad
            out.append(Sample([g, np.array(flag), np.array(inv)], {}, grad=False,
                              name=f"{shape}/{bad}/flag{flag}/inv{inv}"))
    return out


def _listed(grads: list[Any]) -> Any:
    """A sample's `dtypes` when the variadic input pins one dtype per tensor (a list in its place)."""
    return [grads, None, None]


def _multi_samples(rng: np.random.Generator) -> list[Sample]:
    """Mixed shapes and dtypes (empty tensors included), an inf/NaN in one tensor of many, a raised flag
    kept, no tensors at all, and more tensors than one GPU dispatch binds."""
    shapes = [(3, 4), (257,), (2, 3, 5), (0,), (1,), (33,), (4, 4)]
    kinds = [float32, float16, bfloat16, float16, bfloat16, float32, float16]
    out = []
    for bad, where, flag, inv in ((None, 0, 0.0, 2.0 ** -16), (np.inf, 2, 0.0, 0.5), (np.nan, 1, 0.0, 1.0),
                                  (None, 0, 1.0, 0.25), (-np.inf, 6, 0.0, 2.0 ** -10)):
        grads = [rng.uniform(-1e3, 1e3, s) for s in shapes]
        if bad is not None:
            grads[where].reshape(-1)[rng.integers(grads[where].size)] = bad
        out.append(Sample([grads, np.array(flag), np.array(inv)], {}, grad=False, dtypes=_listed(kinds),
                          name=f"mixed/{bad}@{where}/flag{flag}/inv{inv}"))
    out.append(Sample([[], np.array(1.0), np.array(0.5)], {}, grad=False, name="no tensors"))
    for bad in (None, np.nan):
        many = [rng.uniform(-10, 10, (1 + k % 5,)) for k in range(40)]
        if bad is not None:
            many[37][0] = bad
        out.append(Sample([many, np.array(0.0), np.array(0.125)], {}, grad=False,
                          dtypes=_listed([kinds[k % 3] for k in range(40)]), name=f"40 tensors/{bad}"))
    return out


def _multi_errors() -> list[ErrorSample]:
    return [ErrorSample([[np.ones(3)], np.zeros(2), np.ones(())], {}, ShapeError, "'found_inf' must hold one"),
            ErrorSample([[np.ones(3), np.ones(2)], np.zeros(()), np.ones(())], {}, DTypeError, "grads[1] is int64",
                        dtypes=_listed([None, int64]))]


def _update_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for scale, tracker, flag, interval in ((65536.0, 0.0, 0.0, 2000), (65536.0, 1999.0, 0.0, 2000),
                                           (65536.0, 5.0, 1.0, 2000), (1.0, 2.0, 0.0, 3), (3e38, 0.0, 0.0, 1),
                                           (0.5, 7.0, 1.0, 8)):
        out.append(Sample([np.array(scale), np.array(tracker), np.array(flag)],
                          {"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": interval}, grad=False,
                          name=f"s{scale}/t{tracker}/inf{flag}/i{interval}"))
    return out


def _unscale_errors() -> list[ErrorSample]:
    return [ErrorSample([np.ones(3), np.zeros(2), np.ones(())], {}, ShapeError, "'found_inf' must hold one element"),
            ErrorSample([np.ones(3), np.zeros(()), np.ones((2, 2))], {}, ShapeError, "'inv_scale' must hold one")]


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "amp_unscale_check_", ("grad", "found_inf", "inv_scale"),
        _scalar_state("amp_unscale_check_", ("grad", "found_inf", "inv_scale"), 1),
        dtype=lambda d, a: [], dtypes=(float32,), inplace=True, num_outputs=0,
        contiguous=("grad", "found_inf", "inv_scale"), mutates=("grad", "found_inf"),
        reference=unscale_check_reference, samples=_unscale_samples, error_samples=_unscale_errors,
        doc="grad *= inv_scale in place; found_inf becomes 1.0 when grad holds an inf or a NaN (and is left "
            "alone otherwise, so one flag collects every gradient of a step)"))
    registry.register(OpSchema(
        "amp_unscale_check_multi_", ("grads*", "found_inf", "inv_scale"), _multi_shapes, dtype=_multi_dtypes,
        dtypes=(float32,), dispatch_on=1, inplace=True, num_outputs=0,
        contiguous=("grads*", "found_inf", "inv_scale"), mutates=("grads*", "found_inf"),
        reference=unscale_check_multi_reference, samples=_multi_samples, error_samples=_multi_errors,
        doc="every gradient of a list (float32, float16 or bfloat16, mixed) *= inv_scale in place, with one "
            "inf/NaN check over them all into found_inf (PyTorch's _amp_foreach_non_finite_check_and_unscale_): "
            "one kernel call per step instead of one per gradient"))
    registry.register(OpSchema(
        "amp_update_scale_", ("scale", "growth_tracker", "found_inf"),
        _scalar_state("amp_update_scale_", ("scale", "growth_tracker", "found_inf"), 0),
        attrs={"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000},
        dtype=lambda d, a: [], dtypes=(float32,), inplace=True, num_outputs=0,
        contiguous=("scale", "growth_tracker", "found_inf"), mutates=("scale", "growth_tracker"),
        reference=update_scale_reference, samples=_update_samples,
        doc="dynamic loss scale update: on found_inf, scale *= backoff_factor and the tracker resets; "
            "otherwise the tracker counts clean steps and after growth_interval of them scale *= "
            "growth_factor (unless that overflows float32) and the tracker resets"))

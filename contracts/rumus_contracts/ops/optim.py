"""Fused optimizer steps: in-place kernels, one launch per parameter (PyTorch's update rules)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import float32, float64
from ..errors import ShapeError
from ..schema import OpRegistry, OpSchema, Sample, Shape


def _same_shapes(op: str) -> Any:
    def rule(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> list[Shape]:
        if any(tuple(s) != tuple(shapes[0]) for s in shapes):
            raise ShapeError(f"{op}: parameter and state shapes differ: {[tuple(s) for s in shapes]}")
        return []
    return rule


def adam_reference(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, beta1: float,
                   beta2: float, eps: float, weight_decay: float, decoupled: bool,
                   step: int) -> tuple[np.ndarray, ...]:
    p, m, v = p.copy(), m.copy(), v.copy()
    if weight_decay and decoupled:
        p = p * (1 - lr * weight_decay)
    elif weight_decay:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
    p = p - (lr / bc1) * m / (np.sqrt(v) / np.sqrt(bc2) + eps)
    return p, g, m, v


def sgd_reference(p: np.ndarray, g: np.ndarray, buf: np.ndarray, lr: float, momentum: float,
                  dampening: float, weight_decay: float, nesterov: bool, first: bool) -> tuple[np.ndarray, ...]:
    p, buf = p.copy(), buf.copy()
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        buf = g.copy() if first else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    return p - lr * g, g, buf


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


def register(registry: OpRegistry) -> None:
    registry.register(OpSchema(
        "adam_step", ("param", "grad", "exp_avg", "exp_avg_sq"), _same_shapes("adam_step"),
        attrs={"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
               "decoupled": False, "step": 1},
        dtype=lambda d, a: [], dtypes=(float32, float64), inplace=True, num_outputs=0,
        contiguous=("param", "grad", "exp_avg", "exp_avg_sq"), mutates=("param", "exp_avg", "exp_avg_sq"),
        reference=adam_reference,
        samples=_adam_samples,
        doc="one Adam/AdamW update in place on param, exp_avg, exp_avg_sq (grad is read only; "
            "the reference also returns the effective grad, which the suite ignores)"))
    registry.register(OpSchema(
        "sgd_step", ("param", "grad", "momentum_buffer"), _same_shapes("sgd_step"),
        attrs={"lr": 1e-2, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
               "first": True},
        dtype=lambda d, a: [], dtypes=(float32, float64), inplace=True, num_outputs=0,
        contiguous=("param", "grad", "momentum_buffer"), mutates=("param", "momentum_buffer"),
        reference=sgd_reference, samples=_sgd_samples,
        doc="one SGD update (momentum, dampening, nesterov, weight decay) in place on param and "
            "momentum_buffer; first=True initialises the buffer to the gradient"))

"""Activation functions (PyTorch's definitions): float64 references and sample domains.

Each activation's kernels and its derivative come from its entry in expressions.py: the C and WGSL
bodies are rendered from it, and the fused backward op `<name>_backward(grad, x) = grad * f'(x)` is
registered from it (expr_schemas.register_backward), so the core's backward formula is one kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..schema import OpRegistry, OpSchema, Sample
from ..shapes import elementwise
from . import expr_schemas as table
from ._common import UNARY_SHAPES, Domain, away_from_zero, uniform

SQRT_2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_KAPPA = 0.044715
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

_erf_scalar = np.vectorize(math.erf, otypes=[np.float64])


def erf_ref(x: np.ndarray) -> Any:
    """math.erf elementwise (scipy is not a dependency)."""
    return _erf_scalar(np.asarray(x, dtype=np.float64))


def _softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> Any:
    bx = x * beta
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


def _elu(x: np.ndarray, alpha: float = 1.0) -> Any:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _softplus_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # values around both regimes, kept off the threshold kinks of the sampled attrs (bx = 20 and 3)
    x: np.ndarray = rng.uniform(-4, 4, shape)
    x = np.where(np.abs(x * 2.0 - 3.0) < 0.1, x + 0.3, x)
    return np.where(rng.uniform(0, 1, shape) < 0.1, x * 8.0 + np.sign(x) * 2.0, x)


def _off_kinks(*kinks: float) -> Domain:
    """uniform(-5, 5) kept 0.1 away from the given points (where the derivative jumps)."""
    def gen(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        x: np.ndarray = rng.uniform(-5, 5, shape)
        for k in kinks:
            x = np.where(np.abs(x - k) < 0.1, x + 0.25, x)
        return x
    return gen


# name: (float64 reference, sample domain, attribute sets)
ACTIVATIONS: dict[str, tuple[Any, Domain, tuple[Mapping[str, Any], ...]]] = {
    "erf": (erf_ref, uniform(-3, 3), ({},)),
    "gelu": (lambda x: 0.5 * x * (1.0 + erf_ref(x / SQRT_2)), uniform(-4, 4), ({},)),
    "gelu_tanh": (lambda x: 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_KAPPA * x ** 3))),
                  uniform(-4, 4), ({},)),
    "silu": (lambda x: x / (1.0 + np.exp(-x)), uniform(-5, 5), ({},)),
    "leaky_relu": (lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope), away_from_zero(0.05, 3),
                   ({"negative_slope": 0.01}, {"negative_slope": 0.2})),
    "softplus": (_softplus, _softplus_domain, ({"beta": 1.0, "threshold": 20.0}, {"beta": 2.0, "threshold": 3.0})),
    "elu": (_elu, away_from_zero(0.05, 3), ({"alpha": 1.0}, {"alpha": 0.5})),
    "celu": (lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0) / alpha)),
             away_from_zero(0.05, 3), ({"alpha": 1.0}, {"alpha": 0.5})),
    "selu": (lambda x: SELU_SCALE * _elu(x, SELU_ALPHA), away_from_zero(0.05, 3), ({},)),
    "softsign": (lambda x: x / (1.0 + np.abs(x)), away_from_zero(0.05, 4), ({},)),
    "mish": (lambda x: x * np.tanh(_softplus(x)), uniform(-5, 5), ({},)),
    "hardswish": (lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, _off_kinks(-3.0, 3.0), ({},)),
    "hardsigmoid": (lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0), _off_kinks(-3.0, 3.0), ({},)),
    "logsigmoid": (lambda x: -np.logaddexp(0.0, -x), uniform(-6, 6), ({},)),
    "tanhshrink": (lambda x: x - np.tanh(x), uniform(-4, 4), ({},)),
}


def _unary_samples(domain: Domain, attrs: Iterable[Mapping[str, Any]]) -> Callable[[np.random.Generator],
                                                                                  list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([domain(rng, s)], dict(a), name=f"{s}{dict(a) or ''}") for a in attrs for s in UNARY_SHAPES]
    return gen


def register(registry: OpRegistry) -> None:
    for name, (ref, domain, attr_sets) in ACTIVATIONS.items():
        registry.register(OpSchema(
            name, ("x",), elementwise(name), attrs=table.attrs(name), broadcast=True, dtypes=table.dtypes(name),
            differentiable=table.differentiable(name), reference=ref, samples=_unary_samples(domain, attr_sets),
            autocast="float32" if name == "softplus" else None,  # PyTorch's float32 list
            doc=f"elementwise {name} (PyTorch's definition)"))
        table.register_backward(registry, name, {"x": domain}, tuple(dict(a) for a in attr_sets))

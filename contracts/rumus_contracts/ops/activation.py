"""Activation functions (PyTorch's definitions) and their fused backward ops.

Each activation `f` has a forward op `f(x, **attrs)` and, where the derivative is more than one
kernel's worth of core ops, a fused `f_backward(grad, x, **attrs) = grad * f'(x)`: the core's
backward formula calls it when the backend has a kernel and falls back to core ops otherwise, so a
backend may ship the forward alone and still train.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..dtype import FLOAT_DTYPES
from ..schema import OpRegistry, OpSchema, Sample
from ..shapes import elementwise
from ._common import UNARY_SHAPES, Domain, away_from_zero, uniform

SQRT_2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_TANH_KAPPA = 0.044715

_erf_scalar = np.vectorize(math.erf, otypes=[np.float64])


def erf_ref(x: np.ndarray) -> Any:
    """math.erf elementwise (scipy is not a dependency)."""
    return _erf_scalar(np.asarray(x, dtype=np.float64))


def _gelu(x: np.ndarray) -> Any:
    return 0.5 * x * (1.0 + erf_ref(x / SQRT_2))


def _gelu_grad(x: np.ndarray) -> Any:
    return 0.5 * (1.0 + erf_ref(x / SQRT_2)) + x * INV_SQRT_2PI * np.exp(-0.5 * x * x)


def _gelu_tanh(x: np.ndarray) -> Any:
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_KAPPA * x ** 3)))


def _gelu_tanh_grad(x: np.ndarray) -> Any:
    t = np.tanh(SQRT_2_OVER_PI * (x + GELU_TANH_KAPPA * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_KAPPA * x * x)


def _sigmoid(x: np.ndarray) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x: np.ndarray) -> Any:
    return x * _sigmoid(x)


def _silu_grad(x: np.ndarray) -> Any:
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _leaky_relu(x: np.ndarray, negative_slope: float = 0.01) -> Any:
    return np.where(x > 0, x, x * negative_slope)


def _leaky_relu_grad(x: np.ndarray, negative_slope: float = 0.01) -> Any:
    return np.where(x > 0, 1.0, negative_slope)


def _softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> Any:
    bx = x * beta
    return np.where(bx > threshold, x, np.log1p(np.exp(np.minimum(bx, threshold))) / beta)


def _softplus_grad(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> Any:
    bx = x * beta
    return np.where(bx > threshold, 1.0, _sigmoid(np.minimum(bx, threshold)))


def _elu(x: np.ndarray, alpha: float = 1.0) -> Any:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _elu_grad(x: np.ndarray, alpha: float = 1.0) -> Any:
    return np.where(x > 0, 1.0, alpha * np.exp(np.minimum(x, 0.0)))


def _backward_ref(grad_fn: Callable[..., Any]) -> Callable[..., Any]:
    def ref(g: np.ndarray, x: np.ndarray, **attrs: Any) -> Any:
        return g * grad_fn(x, **attrs)
    return ref


def _softplus_domain(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # values around both regimes, kept off the threshold kinks of the sampled attrs (bx = 20 and 3)
    x: np.ndarray = rng.uniform(-4, 4, shape)
    x = np.where(np.abs(x * 2.0 - 3.0) < 0.1, x + 0.3, x)
    return np.where(rng.uniform(0, 1, shape) < 0.1, x * 8.0 + np.sign(x) * 2.0, x)


# name: (reference, derivative or None, sample domain, attribute sets)
ACTIVATIONS: dict[str, tuple[Any, Any, Domain, tuple[Mapping[str, Any], ...]]] = {
    "erf": (erf_ref, None, uniform(-3, 3), ({},)),
    "gelu": (_gelu, _gelu_grad, uniform(-4, 4), ({},)),
    "gelu_tanh": (_gelu_tanh, _gelu_tanh_grad, uniform(-4, 4), ({},)),
    "silu": (_silu, _silu_grad, uniform(-5, 5), ({},)),
    "leaky_relu": (_leaky_relu, _leaky_relu_grad, away_from_zero(0.05, 3),
                   ({"negative_slope": 0.01}, {"negative_slope": 0.2})),
    "softplus": (_softplus, _softplus_grad, _softplus_domain,
                 ({"beta": 1.0, "threshold": 20.0}, {"beta": 2.0, "threshold": 3.0})),
    "elu": (_elu, _elu_grad, away_from_zero(0.05, 3), ({"alpha": 1.0}, {"alpha": 0.5})),
}

DEFAULTS: dict[str, dict[str, Any]] = {
    "leaky_relu": {"negative_slope": 0.01},
    "softplus": {"beta": 1.0, "threshold": 20.0},
    "elu": {"alpha": 1.0},
}


def _unary_samples(domain: Domain, attrs: Iterable[Mapping[str, Any]]) -> Callable[[np.random.Generator],
                                                                                  list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([domain(rng, s)], dict(a), name=f"{s}{dict(a) or ''}") for a in attrs for s in UNARY_SHAPES]
    return gen


def _backward_samples(domain: Domain, attrs: Iterable[Mapping[str, Any]]) -> Callable[[np.random.Generator],
                                                                                     list[Sample]]:
    def gen(rng: np.random.Generator) -> list[Sample]:
        return [Sample([rng.uniform(-2, 2, s), domain(rng, s)], dict(a), name=f"{s}{dict(a) or ''}")
                for a in attrs for s in UNARY_SHAPES]
    return gen


def register(registry: OpRegistry) -> None:
    for name, (ref, grad, domain, attr_sets) in ACTIVATIONS.items():
        defaults = DEFAULTS.get(name, {})
        registry.register(OpSchema(
            name, ("x",), elementwise(name), attrs=defaults, broadcast=True, dtypes=FLOAT_DTYPES,
            differentiable=("x",), reference=ref, samples=_unary_samples(domain, attr_sets),
            doc=f"elementwise {name} (PyTorch's definition)"))
        if grad is None:
            continue
        registry.register(OpSchema(
            f"{name}_backward", ("grad", "x"), elementwise(f"{name}_backward"), attrs=defaults, broadcast=True,
            dtypes=FLOAT_DTYPES, differentiable=("grad",), reference=_backward_ref(grad),
            samples=_backward_samples(domain, attr_sets),
            doc=f"grad * {name}'(x): the fused backward of {name} (differentiable in grad only)"))

"""torch.distributions: probability distributions with sample / rsample / log_prob / entropy, and
kl_divergence. Parameters are rumus tensors (numbers broadcast), so log_prob and rsample differentiate
through their parameters — REINFORCE, VAEs and Gaussian policies train as under torch. Formulas are torch's;
random draws come from rumus's generator (the values differ from torch's, the distributions do not)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rumus_contracts import RumusError

from .. import _creation
from .. import _math as M
from .._torch_functions import broadcast_tensors
from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from ..tensor import Tensor

__all__ = [
    "Bernoulli", "Beta", "Categorical", "Distribution", "Exponential", "Independent", "Laplace",
    "MultivariateNormal", "Normal", "OneHotCategorical", "Uniform", "kl_divergence", "register_kl",
]

_LOG_2PI = math.log(2 * math.pi)


def _t(x: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if like is not None:
        return _creation.full(tuple(like.shape), float(x), dtype=like.dtype, device=like.device)
    return _creation.tensor(float(x))


def _shape(sample_shape: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in sample_shape) if not isinstance(sample_shape, int) else (int(sample_shape),)


class Distribution:
    """Base: batch_shape, event_shape, sample (no gradient) / rsample (reparameterised, where possible)."""

    has_rsample = False

    def __init__(self, batch_shape: tuple[int, ...] = (), event_shape: tuple[int, ...] = (),
                 validate_args: bool | None = None) -> None:
        self.batch_shape, self.event_shape = tuple(batch_shape), tuple(event_shape)

    def _extended(self, sample_shape: Any) -> tuple[int, ...]:
        return _shape(sample_shape) + self.batch_shape + self.event_shape

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise RumusError(f"{type(self).__name__} has no reparameterised sampler (rsample); use sample() with a "
                         f"score-function estimator (log_prob)")

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return M.sqrt(self.variance)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_shape={self.batch_shape}, event_shape={self.event_shape})"


class Normal(Distribution):
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        loc_t = loc if isinstance(loc, Tensor) else None
        scale_t = scale if isinstance(scale, Tensor) else None
        ref = loc_t if loc_t is not None else scale_t
        self.loc, self.scale = broadcast_tensors(_t(loc, ref), _t(scale, ref))
        super().__init__(tuple(self.loc.shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = _creation.randn(*self._extended(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return M.add(self.loc, M.mul(eps, self.scale))

    def log_prob(self, value: Tensor) -> Tensor:
        var = M.mul(self.scale, self.scale)
        return M.sub(M.sub(M.neg(M.div(M.square(M.sub(value, self.loc)), M.mul(var, 2.0))), M.log(self.scale)),
                     0.5 * _LOG_2PI)

    def entropy(self) -> Tensor:
        return M.add(M.log(self.scale), 0.5 + 0.5 * _LOG_2PI)

    def cdf(self, value: Tensor) -> Tensor:
        from .._torch_functions import erf
        return M.mul(M.add(erf(M.div(M.sub(value, self.loc), M.mul(self.scale, math.sqrt(2)))), 1.0), 0.5)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return M.mul(self.scale, self.scale)

    @property
    def stddev(self) -> Tensor:
        return self.scale


class Uniform(Distribution):
    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        ref = low if isinstance(low, Tensor) else high if isinstance(high, Tensor) else None
        self.low, self.high = broadcast_tensors(_t(low, ref), _t(high, ref))
        super().__init__(tuple(self.low.shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = _creation.rand(*self._extended(sample_shape), dtype=self.low.dtype, device=self.low.device)
        return M.add(self.low, M.mul(u, M.sub(self.high, self.low)))

    def log_prob(self, value: Tensor) -> Tensor:
        inside = M.logical_and(M.ge(value, self.low), M.lt(value, self.high))
        lp = M.neg(M.log(M.sub(self.high, self.low)))
        return M.where(inside, lp, M._t(-math.inf, lp))

    def entropy(self) -> Tensor:
        return M.log(M.sub(self.high, self.low))

    @property
    def mean(self) -> Tensor:
        return M.mul(M.add(self.high, self.low), 0.5)

    @property
    def variance(self) -> Tensor:
        return M.div(M.square(M.sub(self.high, self.low)), 12.0)


class Laplace(Distribution):
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        ref = loc if isinstance(loc, Tensor) else scale if isinstance(scale, Tensor) else None
        self.loc, self.scale = broadcast_tensors(_t(loc, ref), _t(scale, ref))
        super().__init__(tuple(self.loc.shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = float(2.0 ** -23)
        u = M.sub(M.mul(_creation.rand(*self._extended(sample_shape), dtype=self.loc.dtype,
                                       device=self.loc.device), 2.0 - 2 * eps), 1.0 - eps)
        return M.sub(self.loc, M.mul(M.mul(self.scale, M.sign(u)), M.log1p(M.neg(M.abs(u)))))

    def log_prob(self, value: Tensor) -> Tensor:
        return M.sub(M.neg(M.log(M.mul(self.scale, 2.0))), M.div(M.abs(M.sub(value, self.loc)), self.scale))

    def entropy(self) -> Tensor:
        return M.add(M.log(M.mul(self.scale, 2.0)), 1.0)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return M.mul(M.square(self.scale), 2.0)


class Exponential(Distribution):
    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        self.rate = _t(rate)
        super().__init__(tuple(self.rate.shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = _creation.rand(*self._extended(sample_shape), dtype=self.rate.dtype, device=self.rate.device)
        return M.div(M.neg(M.log1p(M.neg(u))), self.rate)

    def log_prob(self, value: Tensor) -> Tensor:
        lp = M.sub(M.log(self.rate), M.mul(self.rate, value))
        return M.where(M.ge(value, 0.0), lp, M._t(-math.inf, lp))

    def entropy(self) -> Tensor:
        return M.sub(1.0, M.log(self.rate))

    @property
    def mean(self) -> Tensor:
        return M.reciprocal(self.rate)

    @property
    def variance(self) -> Tensor:
        return M.reciprocal(M.square(self.rate))


def _logits_from(probs: Tensor | None, logits: Tensor | None, name: str) -> Tensor:
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: either `probs` or `logits` must be specified, but not both.")
    if logits is not None:
        return M.sub(logits, M.logsumexp(logits, -1, keepdim=True))
    p = _t(probs)
    return M.log(M.div(p, M.sum(p, -1, keepdim=True)))


class Categorical(Distribution):
    """Over the last dim of probs/logits (normalised; torch's rule)."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        self.logits = _logits_from(probs, logits, "Categorical")
        self._num_events = self.logits.shape[-1]
        super().__init__(tuple(self.logits.shape[:-1]))

    @property
    def probs(self) -> Tensor:
        return M.softmax(self.logits, -1)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self.logits.shape)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = _shape(sample_shape)
        n = int(math.prod(shape)) if shape else 1
        flat = self.probs.detach().reshape(-1, self._num_events)
        from .._composites_torch import multinomial
        draws = multinomial(flat, n, True)  # [batch, n]
        out = draws.transpose(0, 1).reshape(*shape, *self.batch_shape)
        return out

    def log_prob(self, value: Tensor) -> Tensor:
        v = value.to("int64") if value.dtype.is_floating else value
        v, logits = broadcast_tensors(v.unsqueeze(-1), self.logits)
        from .._indexing import gather
        return gather(logits, -1, v[..., :1].contiguous()).squeeze(-1)

    def entropy(self) -> Tensor:
        from .._torch_dtype_info import finfo
        logits = M.clamp(self.logits, min=finfo(self.logits.dtype).min)  # -inf logits: 0 * min, not NaN
        return M.neg(M.sum(M.mul(self.probs, logits), -1))

    @property
    def mean(self) -> Tensor:
        return _creation.full(self.batch_shape, math.nan, dtype=self.logits.dtype, device=self.logits.device)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = _creation.arange(self._num_events, device=self.logits.device)
        values = values.reshape(-1, *([1] * len(self.batch_shape)))
        return values.expand(-1, *self.batch_shape) if expand else values


class OneHotCategorical(Distribution):
    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, (self._categorical._num_events,))

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    def sample(self, sample_shape: Any = ()) -> Tensor:
        idx = self._categorical.sample(sample_shape)
        return F.one_hot(idx, self._categorical._num_events).to(self.logits.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        return self._categorical.log_prob(M.argmax(value, -1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    @property
    def mean(self) -> Tensor:
        return self.probs


class Bernoulli(Distribution):
    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: either `probs` or `logits` must be specified, but not both.")
        if logits is not None:
            self.logits = _t(logits)
        else:
            p = _t(probs)
            eps = 1.1920928955078125e-07 if p.dtype.name == "float32" else 2.220446049250313e-16
            pc = M.clamp(p, eps, 1 - eps)
            self.logits = M.sub(M.log(pc), M.log1p(M.neg(pc)))
        super().__init__(tuple(self.logits.shape))

    @property
    def probs(self) -> Tensor:
        return M.sigmoid(self.logits)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            p = self.probs.expand(*self._extended(sample_shape))
            u = _creation.rand(*p.shape, dtype=p.dtype, device=p.device)
            return M.lt(u, p).to(p.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        logits, value = broadcast_tensors(self.logits, _t(value, self.logits))
        return M.neg(F.binary_cross_entropy_with_logits(logits, value, reduction="none"))

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def variance(self) -> Tensor:
        p = self.probs
        return M.mul(p, M.sub(1.0, p))


class Beta(Distribution):
    """Beta(concentration1, concentration0); sampling through two gamma draws on the host (no rsample)."""

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool | None = None) -> None:
        ref = concentration1 if isinstance(concentration1, Tensor) else None
        self.concentration1, self.concentration0 = broadcast_tensors(_t(concentration1, ref), _t(concentration0, ref))
        super().__init__(tuple(self.concentration1.shape))

    def sample(self, sample_shape: Any = ()) -> Tensor:
        from ..random import default_generator
        shape = self._extended(sample_shape)
        import numpy as np
        a = np.broadcast_to(self.concentration1.detach().numpy(), shape)
        b = np.broadcast_to(self.concentration0.detach().numpy(), shape)
        return _creation.tensor(default_generator.rng.beta(a, b), dtype=self.concentration1.dtype,
                                device=self.concentration1.device)

    def log_prob(self, value: Tensor) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return M.sub(M.add(M.mul(M.sub(a, 1.0), M.log(value)), M.mul(M.sub(b, 1.0), M.log1p(M.neg(value)))),
                     _log_beta(a, b))

    @property
    def mean(self) -> Tensor:
        return M.div(self.concentration1, M.add(self.concentration1, self.concentration0))

    @property
    def variance(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = M.add(a, b)
        return M.div(M.mul(a, b), M.mul(M.square(total), M.add(total, 1.0)))


def _lgamma(x: Tensor) -> Tensor:
    """log Gamma(x) for x > 0, written with core ops so it differentiates: shifted up by 8 with
    Gamma(x) = Gamma(x + 8) / (x (x+1) ... (x+7)), then Stirling's series (error below 1e-14 there, in the
    value and in its derivative)."""
    shift = M._t(0.0, x)
    for i in range(8):
        shift = M.add(shift, M.log(M.add(x, float(i))))
    z = M.add(x, 8.0)
    inv = M.reciprocal(z)
    inv2 = M.mul(inv, inv)
    series = M.mul(inv, M.add(1 / 12, M.mul(inv2, M.add(-1 / 360, M.mul(inv2, M.add(
        1 / 1260, M.mul(inv2, M.add(-1 / 1680, M.mul(inv2, 1 / 1188)))))))))
    stirling = M.add(M.sub(M.mul(M.sub(z, 0.5), M.log(z)), z), M.add(series, 0.5 * math.log(2 * math.pi)))
    return M.sub(stirling, shift)


def _log_beta(a: Tensor, b: Tensor) -> Tensor:
    return M.sub(M.add(_lgamma(a), _lgamma(b)), _lgamma(M.add(a, b)))


class MultivariateNormal(Distribution):
    """N(loc, Sigma) from covariance_matrix, precision_matrix or scale_tril (lower Cholesky factor)."""

    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None) -> None:
        from .. import linalg
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            self.scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.scale_tril = linalg.cholesky(covariance_matrix)
        else:
            assert precision_matrix is not None
            self.scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        self.loc = loc
        d = loc.shape[-1]
        batch = tuple(_broadcast_batch(tuple(loc.shape[:-1]), tuple(self.scale_tril.shape[:-2])))
        super().__init__(batch, (d,))

    @property
    def covariance_matrix(self) -> Tensor:
        return M.matmul(self.scale_tril, self.scale_tril.transpose(-2, -1))

    @property
    def precision_matrix(self) -> Tensor:
        from .. import linalg
        return linalg.inv(self.covariance_matrix)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = _creation.randn(*self._extended(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return M.add(self.loc, M.matmul(self.scale_tril, eps.unsqueeze(-1)).squeeze(-1))

    def _half_log_det(self) -> Tensor:
        from .._torch_functions import diagonal
        return M.sum(M.log(diagonal(self.scale_tril, 0, -2, -1)), -1)

    def log_prob(self, value: Tensor) -> Tensor:
        from .. import linalg
        diff = M.sub(value, self.loc)
        shape = tuple(_broadcast_batch(tuple(diff.shape[:-1]), tuple(self.scale_tril.shape[:-2])))
        d = self.loc.shape[-1]
        tril = self.scale_tril.expand(*shape, d, d) if tuple(self.scale_tril.shape[:-2]) != shape else \
            self.scale_tril
        diff = diff.expand(*shape, d) if tuple(diff.shape[:-1]) != shape else diff
        z = linalg.solve(tril, diff.unsqueeze(-1)).squeeze(-1)
        maha = M.sum(M.mul(z, z), -1)
        return M.sub(M.mul(M.add(maha, d * _LOG_2PI), -0.5), self._half_log_det())

    def entropy(self) -> Tensor:
        d = self.loc.shape[-1]
        return M.add(M._t(0.5 * d * (1.0 + _LOG_2PI), self.loc), self._half_log_det())

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        from .._torch_functions import diagonal
        return diagonal(self.covariance_matrix, 0, -2, -1)


def _broadcast_batch(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    import numpy as np
    return tuple(np.broadcast_shapes(a, b))


class Independent(Distribution):
    """Reinterprets the last `reinterpreted_batch_ndims` batch dims of a distribution as event dims."""

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, int(reinterpreted_batch_ndims)
        n = self.reinterpreted_batch_ndims
        shape = base_distribution.batch_shape
        super().__init__(shape[:len(shape) - n], shape[len(shape) - n:] + base_distribution.event_shape)
        self.has_rsample = base_distribution.has_rsample

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def _sum_rightmost(self, x: Tensor) -> Tensor:
        n = self.reinterpreted_batch_ndims
        return M.sum(x, tuple(range(-n, 0))) if n else x

    def log_prob(self, value: Tensor) -> Tensor:
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self) -> Tensor:
        return self._sum_rightmost(self.base_dist.entropy())

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance


# ---- KL divergence ---------------------------------------------------------------------------------
_KL: dict[tuple[type, type], Callable[[Any, Any], Tensor]] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable[[Any, Any], Tensor]], Callable[[Any, Any], Tensor]]:
    def wrap(fn: Callable[[Any, Any], Tensor]) -> Callable[[Any, Any], Tensor]:
        _KL[(type_p, type_q)] = fn
        return fn
    return wrap


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    for (tp, tq), fn in _KL.items():
        if isinstance(p, tp) and isinstance(q, tq):
            return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p={type(p).__name__}, q={type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = M.square(M.div(p.scale, q.scale))
    t1 = M.square(M.div(M.sub(p.loc, q.loc), q.scale))
    return M.mul(M.sub(M.sub(M.add(var_ratio, t1), 1.0), M.log(var_ratio)), 0.5)


@register_kl(Categorical, Categorical)
def _kl_categorical(p: Categorical, q: Categorical) -> Tensor:
    return M.sum(M.mul(p.probs, M.sub(p.logits, q.logits)), -1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = M.mul(p.probs, M.sub(F.softplus(M.neg(q.logits)), F.softplus(M.neg(p.logits))))
    t2 = M.mul(M.sub(1.0, p.probs), M.sub(F.softplus(q.logits), F.softplus(p.logits)))
    return M.add(t1, t2)


@register_kl(Uniform, Uniform)
def _kl_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = M.log(M.div(M.sub(q.high, q.low), M.sub(p.high, p.low)))
    outside = M.logical_or(M.gt(q.low, p.low), M.lt(q.high, p.high))
    return M.where(outside, M._t(math.inf, result), result)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    from .. import linalg
    d = p.loc.shape[-1]
    half_term1 = M.sub(q._half_log_det(), p._half_log_det())
    m = linalg.solve(q.scale_tril, p.scale_tril)
    term2 = M.sum(M.mul(m, m), (-2, -1))
    z = linalg.solve(q.scale_tril, M.sub(q.loc, p.loc).unsqueeze(-1)).squeeze(-1)
    term3 = M.sum(M.mul(z, z), -1)
    return M.add(half_term1, M.mul(M.sub(M.add(term2, term3), float(d)), 0.5))


@register_kl(Independent, Independent)
def _kl_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return p._sum_rightmost(kl_divergence(p.base_dist, q.base_dist))


@register_kl(Exponential, Exponential)
def _kl_exponential(p: Exponential, q: Exponential) -> Tensor:
    ratio = M.div(q.rate, p.rate)
    return M.sub(M.sub(ratio, M.log(ratio)), 1.0)


@register_kl(Laplace, Laplace)
def _kl_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = M.div(p.scale, q.scale)
    loc_abs_diff = M.abs(M.sub(p.loc, q.loc))
    t1 = M.neg(M.log(scale_ratio))
    t2 = M.div(loc_abs_diff, q.scale)
    t3 = M.mul(scale_ratio, M.exp(M.neg(M.div(loc_abs_diff, p.scale))))
    return M.sub(M.add(M.add(t1, t2), t3), 1.0)

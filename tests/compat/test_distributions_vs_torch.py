"""rumus.distributions against torch.distributions: log_prob, entropy, mean/variance, kl_divergence and their
gradients through the parameters, the same calls in both; samples checked by their moments."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import rumus

from ._same_code import assert_matches_torch

RNG = np.random.default_rng(5)
LOC, SCALE = RNG.normal(size=(3,)), RNG.uniform(0.5, 2.0, size=(3,))
LOGITS = RNG.normal(size=(2, 4))
PROBS = RNG.uniform(0.1, 0.9, size=(5,))
_L = np.tril(RNG.normal(size=(3, 3))) + 2 * np.eye(3)
COV = _L @ _L.T
X3 = RNG.normal(size=(4, 3))


def D(lib: ModuleType) -> Any:
    return lib.distributions


CASES: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "normal_log_prob": ([LOC, SCALE], lambda L, m, s: D(L).Normal(m, s).log_prob(L.tensor(X3, dtype=m.dtype))),
    "normal_entropy": ([LOC, SCALE], lambda L, m, s: D(L).Normal(m, s).entropy()),
    "normal_cdf": ([LOC, SCALE], lambda L, m, s: D(L).Normal(m, s).cdf(L.tensor(X3, dtype=m.dtype))),
    "normal_kl": ([LOC, SCALE], lambda L, m, s: D(L).kl_divergence(D(L).Normal(m, s), D(L).Normal(m * 0.5, s * 2))),
    "uniform": ([LOC - 3, LOC + 3], lambda L, a, b: D(L).Uniform(a, b).log_prob(L.tensor(LOC, dtype=a.dtype))
                + D(L).Uniform(a, b).entropy()),
    "laplace": ([LOC, SCALE], lambda L, m, s: D(L).Laplace(m, s).log_prob(L.tensor(X3, dtype=m.dtype))),
    "laplace_kl": ([LOC, SCALE], lambda L, m, s: D(L).kl_divergence(D(L).Laplace(m, s), D(L).Laplace(m + 1, s))),
    "exponential": ([SCALE], lambda L, r: D(L).Exponential(r).log_prob(L.tensor(np.abs(X3), dtype=r.dtype))),
    "categorical_log_prob": ([LOGITS], lambda L, lg: D(L).Categorical(logits=lg).log_prob(L.tensor([[0, 3], [2, 1],
                                                                                              [1, 1]]))),
    "categorical_entropy": ([LOGITS], lambda L, lg: D(L).Categorical(logits=lg).entropy()),
    "categorical_probs_arg": ([np.exp(LOGITS)], lambda L, p: D(L).Categorical(probs=p).log_prob(L.tensor([1, 2]))),
    "categorical_kl": ([LOGITS], lambda L, lg: D(L).kl_divergence(D(L).Categorical(logits=lg),
                                                               D(L).Categorical(logits=lg * 0.3))),
    "bernoulli": ([PROBS], lambda L, p: D(L).Bernoulli(probs=p).log_prob(L.tensor([1.0, 0, 1, 1, 0], dtype=p.dtype))
                  + D(L).Bernoulli(probs=p).entropy()),
    "bernoulli_logits_kl": ([LOC], lambda L, lg: D(L).kl_divergence(D(L).Bernoulli(logits=lg),
                                                                   D(L).Bernoulli(logits=-lg))),
    "mvn_log_prob": ([LOC, COV], lambda L, m, c: D(L).MultivariateNormal(m, covariance_matrix=c).log_prob(
        L.tensor(X3, dtype=m.dtype))),
    "mvn_entropy_tril": ([LOC, _L], lambda L, m, t: D(L).MultivariateNormal(m, scale_tril=L.tril(t)).entropy()),
    "mvn_kl": ([LOC, _L], lambda L, m, t: D(L).kl_divergence(D(L).MultivariateNormal(m, scale_tril=L.tril(t)),
                                                            D(L).MultivariateNormal(m * 0, scale_tril=L.tril(t) * 2))),
    "independent": ([X3, np.abs(X3) + 0.5], lambda L, m, s: D(L).Independent(D(L).Normal(m, s), 1).log_prob(
        L.tensor(X3[::-1].copy(), dtype=m.dtype))),
    "beta": ([SCALE, SCALE[::-1].copy()], lambda L, a, b: D(L).Beta(a, b).log_prob(L.tensor([0.2, 0.5, 0.9],
                                                                                              dtype=a.dtype))),
    "onehot": ([LOGITS], lambda L, lg: D(L).OneHotCategorical(logits=lg).log_prob(L.tensor(np.eye(4)[[1, 3]],
                                                                                           dtype=lg.dtype))),
}


TOLERANCES = {"float64": (1e-9, 1e-11), "float32": (3e-5, 3e-6)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_values_and_gradients(name: str, dtype: str) -> None:
    assert_matches_torch(torch, rumus, CASES[name], dtype, TOLERANCES)


def test_samples_have_the_distributions_moments() -> None:
    rumus.manual_seed(0)
    d = rumus.distributions
    n = d.Normal(rumus.tensor([1.0, -2.0]), rumus.tensor([0.5, 3.0])).sample((20000,)).numpy()
    np.testing.assert_allclose(n.mean(0), [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(n.std(0), [0.5, 3.0], rtol=0.03)
    c = d.Categorical(probs=rumus.tensor([0.1, 0.6, 0.3])).sample((20000,)).numpy()
    np.testing.assert_allclose(np.bincount(c, minlength=3) / 20000, [0.1, 0.6, 0.3], atol=0.015)
    b = d.Bernoulli(probs=rumus.tensor([0.2, 0.7])).sample((20000,)).numpy()
    np.testing.assert_allclose(b.mean(0), [0.2, 0.7], atol=0.015)
    mvn = d.MultivariateNormal(rumus.tensor(LOC), covariance_matrix=rumus.tensor(COV)).sample((40000,)).numpy()
    np.testing.assert_allclose(np.cov(mvn.T), COV, rtol=0.05, atol=0.1)
    u = d.Uniform(rumus.tensor(-1.0), rumus.tensor(3.0)).sample((10000,)).numpy()
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1.0) < 0.05


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_rsample_carries_gradients_and_sample_does_not(lib: ModuleType) -> None:
    loc = lib.zeros(3, requires_grad=True)
    dist = lib.distributions.Normal(loc, lib.ones(3))
    dist.rsample((5,)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [5.0, 5.0, 5.0])
    assert not dist.sample((2,)).requires_grad
    assert tuple(lib.distributions.Categorical(logits=lib.zeros(2, 5)).sample((7,)).shape) == (7, 2)


def test_reinforce_step_matches_torch() -> None:
    """A policy-gradient loss (-log_prob * advantage) through Categorical gives torch's gradients."""
    w = RNG.normal(size=(4, 3))
    obs = RNG.normal(size=(6, 4))
    actions = [0, 2, 1, 1, 0, 2]
    adv = RNG.normal(size=(6,))
    grads = []
    for lib in (torch, rumus):
        wt = lib.tensor(w, requires_grad=True)
        logits = lib.tensor(obs) @ wt
        lp = lib.distributions.Categorical(logits=logits).log_prob(lib.tensor(actions))
        (-(lp * lib.tensor(adv)).mean()).backward()
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10)

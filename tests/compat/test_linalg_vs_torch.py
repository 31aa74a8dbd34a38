"""rumus.linalg against torch.linalg: the same calls, values and gradients (torch's autograd is the reference),
float64 and float32, batched where torch batches."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import rumus

from ._same_code import assert_matches_torch

RNG = np.random.default_rng(11)
SQ = RNG.normal(size=(2, 4, 4)) + 3 * np.eye(4)       # well-conditioned, batched
_B = RNG.normal(size=(4, 4))
SPD = _B @ _B.T + 4 * np.eye(4)                       # symmetric positive-definite
TALL = RNG.normal(size=(6, 3))
WIDE = RNG.normal(size=(3, 5))
RHS = RNG.normal(size=(2, 4, 2))
VEC = RNG.normal(size=(4,))


def _sym(L: ModuleType, x: Any) -> Any:
    return (x + x.transpose(-2, -1)) / 2


CASES: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "inv": ([SQ], lambda L, a: L.linalg.inv(a)),
    "det": ([SQ], lambda L, a: L.linalg.det(a)),
    "slogdet": ([SQ], lambda L, a: L.linalg.slogdet(a).logabsdet),
    "solve": ([SQ, RHS], lambda L, a, b: L.linalg.solve(a, b)),
    "solve_vector": ([SQ[0], VEC], lambda L, a, b: L.linalg.solve(a, b)),
    "solve_right": ([SQ, RHS.transpose(0, 2, 1)], lambda L, a, b: L.linalg.solve(a, b, left=False)),
    "cholesky": ([SPD], lambda L, a: L.linalg.cholesky(_sym(L, a))),
    "cholesky_upper": ([SPD], lambda L, a: L.linalg.cholesky(_sym(L, a), upper=True)),
    "qr_q": ([TALL], lambda L, a: L.linalg.qr(a).Q),
    "qr_r": ([TALL], lambda L, a: L.linalg.qr(a).R),
    "qr_both": ([SQ[0]], lambda L, a: L.linalg.qr(a).Q.sum() + L.linalg.qr(a).R.sum()),
    "svd_s": ([TALL], lambda L, a: L.linalg.svdvals(a)),
    "svd_uv_tall": ([TALL], lambda L, a: (lambda r: (r.U @ r.Vh[:, :1]).abs().sum() + r.S.sum())(
        L.linalg.svd(a, full_matrices=False))),
    "svd_uv_wide": ([WIDE], lambda L, a: (lambda r: (r.U[:1] @ r.Vh).abs().sum())(
        L.linalg.svd(a, full_matrices=False))),
    "eigh_values": ([SPD], lambda L, a: L.linalg.eigvalsh(_sym(L, a))),
    "eigh_vectors": ([SPD], lambda L, a: L.linalg.eigh(_sym(L, a)).eigenvectors.abs().sum(0)),
    "lstsq": ([TALL, RNG.normal(size=(6, 2))], lambda L, a, b: L.linalg.lstsq(a, b).solution),
    "pinv": ([TALL], lambda L, a: L.linalg.pinv(a)),
    "matrix_power": ([SQ], lambda L, a: L.linalg.matrix_power(a, 3)),
    "matrix_power_neg": ([SQ], lambda L, a: L.linalg.matrix_power(a, -2)),
    "multi_dot": ([TALL, WIDE], lambda L, a, b: L.linalg.multi_dot([a, b, b.T])),
    "vector_norm": ([SQ], lambda L, a: L.linalg.vector_norm(a, 3, dim=(1, 2))),
    "vector_norm_inf": ([SQ], lambda L, a: L.linalg.vector_norm(a, float("inf"), dim=-1)),
    "norm_default": ([SQ], lambda L, a: L.linalg.norm(a)),
    "norm_fro": ([SQ[0]], lambda L, a: L.linalg.norm(a, "fro")),
    "matrix_norm_nuc": ([SQ], lambda L, a: L.linalg.matrix_norm(a, "nuc")),
    "matrix_norm_2": ([SQ], lambda L, a: L.linalg.matrix_norm(a, 2)),
    "matrix_norm_1": ([SQ], lambda L, a: L.linalg.matrix_norm(a, 1)),
    "matrix_norm_inf_keep": ([SQ], lambda L, a: L.linalg.matrix_norm(a, float("inf"), keepdim=True)),
    "cond": ([SQ], lambda L, a: L.linalg.cond(a)),
    "vecdot": ([SQ, SQ[::-1].copy()], lambda L, a, b: L.linalg.vecdot(a, b)),
}


TOLERANCES = {"float64": (1e-8, 1e-10), "float32": (2e-4, 2e-5)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_values_and_gradients(name: str, dtype: str) -> None:
    assert_matches_torch(torch, rumus, CASES[name], dtype, TOLERANCES)


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_singular_and_indefinite_matrices_raise(lib: ModuleType) -> None:
    with pytest.raises(RuntimeError):
        lib.linalg.inv(lib.zeros(3, 3))
    with pytest.raises(RuntimeError):
        lib.linalg.cholesky(-lib.eye(3))


def test_det_gradient_at_a_singular_matrix_is_the_adjugate() -> None:
    """At a singular matrix det's derivative is still the adjugate (finite differences agree); torch 2.13
    returns zeros there, which finite differences contradict, so the reference here is the difference."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    got = rumus.tensor(a, requires_grad=True)
    rumus.linalg.det(got).backward()
    eps, fd = 1e-6, np.zeros_like(a)
    for i in range(2):
        for j in range(2):
            hi, lo = a.copy(), a.copy()
            hi[i, j] += eps
            lo[i, j] -= eps
            fd[i, j] = (np.linalg.det(hi) - np.linalg.det(lo)) / (2 * eps)
    np.testing.assert_allclose(got.grad.numpy(), fd, atol=1e-6)
    np.testing.assert_allclose(got.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_torch_level_spellings(lib: ModuleType) -> None:
    a = lib.tensor(SQ[0])
    np.testing.assert_allclose(lib.det(a).numpy(), np.linalg.det(SQ[0]), rtol=1e-10)
    np.testing.assert_allclose(lib.inverse(a).numpy(), np.linalg.inv(SQ[0]), rtol=1e-8, atol=1e-12)
    u, s, v = lib.svd(a)
    np.testing.assert_allclose((u * s) @ v.T, SQ[0], atol=1e-10)
    np.testing.assert_allclose(lib.logdet(lib.tensor(SPD)).numpy(), np.linalg.slogdet(SPD)[1], rtol=1e-10)

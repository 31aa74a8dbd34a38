"""torch's functions added for real programs (rumus/_torch_functions.py), each called the same way under torch
and under rumus: values and, for float inputs, gradients (torch's autograd is the reference)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import rumus

from ._same_code import assert_matches_torch

RNG = np.random.default_rng(7)
A = RNG.uniform(-0.9, 0.9, (3, 4))          # inside asin/acos's domain
B = RNG.uniform(-2, 2, (3, 4))
P = RNG.uniform(0.1, 3, (3, 4))              # positive: logs
SQ = RNG.normal(size=(4, 4))
V3 = RNG.normal(size=(2, 3))
W3 = RNG.normal(size=(2, 3))

# name -> (inputs, call(lib, *tensors))
CASES: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "erf": ([B], lambda L, x: L.erf(x)),
    "tan": ([A], lambda L, x: L.tan(x)),
    "atan": ([B], lambda L, x: L.atan(x)),
    "asin": ([A], lambda L, x: L.asin(x)),
    "acos": ([A], lambda L, x: L.acos(x)),
    "sinh": ([B * 1e-3], lambda L, x: L.sinh(x)),
    "cosh": ([B], lambda L, x: L.cosh(x)),
    "log10": ([P], lambda L, x: L.log10(x)),
    "log2": ([P], lambda L, x: L.log2(x)),
    "deg2rad": ([B], lambda L, x: L.deg2rad(x)),
    "hypot": ([B, A], lambda L, x, y: L.hypot(x, y)),
    "xlogy": ([np.where(B > 0, B, 0.0), P], lambda L, x, y: L.xlogy(x, y)),
    "clamp_min": ([B], lambda L, x: L.clamp_min(x, 0.1)),
    "lerp": ([B, A], lambda L, x, y: L.lerp(x, y, 0.3)),
    "addcmul": ([B, A, P], lambda L, x, y, z: L.addcmul(x, y, z, value=0.5)),
    "addcdiv": ([B, A, P], lambda L, x, y, z: L.addcdiv(x, y, z, value=2.0)),
    "addmm": ([RNG.normal(size=(3, 2)), B, RNG.normal(size=(4, 2))],
              lambda L, x, a, b: L.addmm(x, a, b, beta=0.5, alpha=2.0)),
    "baddbmm": ([RNG.normal(size=(2, 3, 2)), RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 2))],
                lambda L, x, a, b: L.baddbmm(x, a, b)),
    "t": ([B], lambda L, x: L.t(x)),
    "diag_vec": ([B[0]], lambda L, x: L.diag(x, 1)),
    "diag_mat": ([SQ], lambda L, x: L.diag(x, -1)),
    "diagonal": ([RNG.normal(size=(2, 3, 4))], lambda L, x: L.diagonal(x, 1, 1, 2)),
    "trace": ([SQ], lambda L, x: L.trace(x)),
    "kron": ([V3, W3], lambda L, x, y: L.kron(x, y)),
    "cross": ([V3, W3], lambda L, x, y: L.cross(x, y, dim=1)),
    "dist": ([B, A], lambda L, x, y: L.dist(x, y)),
    "cdist": ([RNG.normal(size=(5, 3)), RNG.normal(size=(4, 3))], lambda L, x, y: L.cdist(x, y)),
    "tensordot": ([RNG.normal(size=(2, 3, 4)), RNG.normal(size=(4, 3, 5))],
                  lambda L, x, y: L.tensordot(x, y, dims=([1, 2], [1, 0]))),
    "hstack": ([B, A], lambda L, x, y: L.hstack([x, y])),
    "vstack": ([B[0], A[1]], lambda L, x, y: L.vstack([x, y])),
    "dstack": ([B, A], lambda L, x, y: L.dstack([x, y])),
    "column_stack": ([B[0], A[0]], lambda L, x, y: L.column_stack([x, y])),
    "movedim": ([RNG.normal(size=(2, 3, 4))], lambda L, x: L.movedim(x, (0, 1), (2, 0))),
    "tile": ([V3], lambda L, x: L.tile(x, (2, 1, 2))),
    "rot90": ([B], lambda L, x: L.rot90(x, 3, (0, 1))),
    "diff": ([B], lambda L, x: L.diff(x, n=2, dim=1)),
    "nansum": ([np.where(B > 1, np.nan, B)], lambda L, x: L.nansum(x, 1)),
    "nanmean": ([np.where(B > 1, np.nan, B)], lambda L, x: L.nanmean(x, 0)),
    "unfold": ([RNG.normal(size=(7, 2))], lambda L, x: x.unfold(0, 3, 2)),
    "var_mean": ([B], lambda L, x: L.var_mean(x, 1)[0] + L.var_mean(x, 1)[1]),
    "cartesian_prod": ([B[0], A[0, :2]], lambda L, x, y: L.cartesian_prod(x, y)),
    "block_diag": ([V3, W3[:1]], lambda L, x, y: L.block_diag(x, y)),
    "nan_to_num": ([np.array([np.nan, np.inf, -np.inf, 1.5])], lambda L, x: L.nan_to_num(x, nan=2.0)),
}


TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_values_and_gradients(name: str, dtype: str) -> None:
    assert_matches_torch(torch, rumus, CASES[name], dtype, TOLERANCES)


def test_sinh_keeps_small_arguments() -> None:
    x = np.array([1e-10, -3e-8, 1e-30], np.float32)
    np.testing.assert_allclose(rumus.sinh(rumus.tensor(x)).numpy(), np.sinh(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_legacy_constructors_and_dtype_info(lib: ModuleType) -> None:
    assert tuple(lib.FloatTensor(2, 3).shape) == (2, 3)
    assert lib.LongTensor([1, 2]).dtype == lib.int64
    assert lib.FloatTensor([1, 2]).dtype == lib.float32
    assert lib.BoolTensor([True]).dtype == lib.bool
    assert lib.finfo(lib.float32).eps == np.finfo(np.float32).eps
    assert lib.finfo(lib.float16).max == 65504.0
    assert lib.iinfo(lib.int64).max == 2 ** 63 - 1
    assert isinstance(lib.float32, lib.dtype)
    x = lib.zeros(2, 3)
    assert x.nelement() == 6 and x.ndimension() == 2 and x.is_cuda is False
    assert x.byte().dtype == lib.uint8 and x.short().dtype == lib.int16
    assert lib.tril_indices(3, 3, -1).tolist() == [[1, 2, 2], [0, 0, 1]]
    assert lib.triu_indices(2, 3).tolist() == [[0, 0, 0, 1, 1], [0, 1, 2, 1, 2]]
    assert lib.count_nonzero(lib.tensor([[0, 1], [2, 0]]), dim=0).tolist() == [1, 1]
    assert [t.tolist() for t in lib.unbind(lib.tensor([[1, 2], [3, 4]]), 1)] == [[1, 3], [2, 4]]


@pytest.mark.parametrize("lib", [torch, rumus], ids=["torch", "rumus"])
def test_random_in_place_fills_stay_in_range(lib: ModuleType) -> None:
    lib.manual_seed(0)
    u = lib.empty(1000).uniform_(-2, 3)
    assert -2 <= float(u.min()) and float(u.max()) <= 3 and abs(float(u.mean()) - 0.5) < 0.2
    n = lib.empty(4000).normal_(1.0, 2.0)
    assert abs(float(n.mean()) - 1.0) < 0.15 and abs(float(n.std()) - 2.0) < 0.15
    b = lib.empty(1000).bernoulli_(0.25)
    assert set(np.unique(b.numpy()).tolist()) <= {0.0, 1.0} and abs(float(b.mean()) - 0.25) < 0.06
    r = lib.empty(500, dtype=lib.int64).random_(3, 7)
    assert set(np.unique(r.numpy()).tolist()) == {3, 4, 5, 6}

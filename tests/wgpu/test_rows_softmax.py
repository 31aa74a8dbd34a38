"""softmax / log_softmax on wgpu against float64 references for every launch shape: short rows packed
many per workgroup, long rows one per workgroup, long rows among few rows split over grid z, vec4 and
scalar paths, subgroup and workgroup-memory merges, strided rows, and rows holding -inf, +inf or NaN."""

import numpy as np
import pytest
import torch

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()

RNG = np.random.default_rng(10)
LENGTHS = (1, 3, 4, 5, 255, 256, 257, 1000, 4096, 32001)
PATHS = {"subgroup": {}, "workgroup": {"RUMUS_WGPU_NO_SUBGROUPS": "1"},
         "scalar": {"RUMUS_WGPU_NOVEC": "1", "RUMUS_WGPU_NO_SUBGROUPS": "1"}}


def _reference(x: np.ndarray, dim: int, log: bool) -> np.ndarray:
    t = torch.from_numpy(x.astype(np.float64))
    return (torch.log_softmax(t, dim) if log else torch.softmax(t, dim)).numpy()


def _check(x: np.ndarray, dim: int, log: bool, device_x=None) -> None:
    xd = device_x if device_x is not None else rm.tensor(x, dtype="float32", device=DEVICE)
    got = (rm.log_softmax if log else rm.softmax)(xd, dim).numpy()
    want = _reference(x.astype(np.float32), dim, log)
    # float32 math: exp(x - m) carries about |x - m| * 2^-24 relative error, a few ulp more in the sum
    np.testing.assert_allclose(got, want, rtol=2e-5 if log else 1e-5, atol=2e-5 if log else 1e-7)


@pytest.fixture(params=sorted(PATHS))
def path(request, monkeypatch):
    if request.param == "subgroup" and "subgroup" not in BACKEND.device(0).features:
        pytest.skip("this adapter has no subgroup feature")
    for k, v in PATHS[request.param].items():
        monkeypatch.setenv(k, v)
    return request.param


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_rows_of_every_length_match_float64(path, log):
    for n in LENGTHS:
        rows = 2 if n > 4000 else 7  # few long rows: the split launch; several short rows per workgroup
        _check(RNG.standard_normal((rows, n)) * 8, 1, log)
    _check(RNG.standard_normal((300, 40)) * 5, 1, log)
    _check(RNG.standard_normal((40, 2048)) * 5, 1, log)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_strided_rows(path, log):
    base = RNG.standard_normal((6, 520)) * 4
    # rows along dim 0 (element stride 520), every second column of a row, a view with an offset
    _check(base, 0, log)
    xd = rm.tensor(base, dtype="float32", device=DEVICE)
    _check(base[:, ::2], 1, log, xd[:, ::2])
    _check(base[1:, 3:], 1, log, xd[1:, 3:])
    # an outer-dim softmax with many rows (small groups: neighbouring rows at neighbouring addresses)
    _check(RNG.standard_normal((33, 2500)), 0, log)
    x4 = RNG.standard_normal((3, 5, 4, 9))
    _check(x4, 2, log)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n", [5, 256, 9000])
def test_infinite_and_nan_rows_follow_torch(n, log):
    x = RNG.standard_normal((6, n))
    x[0, :] = -np.inf            # all -inf: NaN, as torch
    x[1, ::3] = -np.inf          # some -inf: 0 / -inf there
    x[2, n // 2] = np.inf        # +inf: the whole row NaN
    x[3, n - 1] = np.nan         # NaN poisons its row only
    x[4, :] = 1e30               # huge but finite: uniform
    got = (rm.log_softmax if log else rm.softmax)(rm.tensor(x, dtype="float32", device=DEVICE), 1).numpy()
    want = _reference(x.astype(np.float32), 1, log)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_split_launch_is_used_and_matches(monkeypatch):
    # one row of 100k elements: partial (max, sum) pairs over grid z, then the merging store pass
    BACKEND.flush(0)
    before = BACKEND.stats(0)["dispatches"]
    x = RNG.standard_normal((1, 100_000)) * 30
    y = rm.softmax(rm.tensor(x, dtype="float32", device=DEVICE), 1)
    assert BACKEND.stats(0)["dispatches"] - before >= 2
    np.testing.assert_allclose(y.numpy(), _reference(x.astype(np.float32), 1, False), rtol=1e-5, atol=1e-9)


def test_the_subgroup_and_workgroup_merges_are_different_programs(monkeypatch):
    # the path fixture's env really switches the kernel: both variants get compiled and agree
    if "subgroup" not in BACKEND.device(0).features:
        pytest.skip("this adapter has no subgroup feature")
    x = RNG.standard_normal((3, 700))
    got = {}
    for env in ("", "1"):
        monkeypatch.setenv("RUMUS_WGPU_NO_SUBGROUPS", env)
        got[env] = rm.softmax(rm.tensor(x, dtype="float32", device=DEVICE), 1).numpy()
    keys = [k for k in BACKEND.device(0).programs._cache if isinstance(k, tuple) and k[0] == "softmax"]
    assert {k[-1] for k in keys} == {True, False}
    np.testing.assert_allclose(got[""], got["1"], rtol=1e-6, atol=1e-9)

"""The softmax / log_softmax row plan (backends/rumus_wgpu/row_plan.py): the planner's choices as a
function of (rows, length, load width, grid limit), and values against float64 for every branch it can
take (packed short rows, one workgroup per row, split rows; unrolled steps, their remainder loop; vec4
and scalar loads, odd lengths, one row, a huge row) under the default split target, no splits and a small
target (RUMUS_WGPU_ROW_SPLIT_WORKGROUPS), forward and fused backward, float32, float16 where the adapter has
it, bfloat16."""

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.ops import get as op
from rumus_wgpu.reduce import SPLIT_CHUNK
from rumus_wgpu.row_plan import SPLIT_MIN_ROW, SPLIT_WORKGROUPS, UNROLL, WORKGROUP, plan_rows
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(1010)
PLANS = {"default": {}, "no split": {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": "0"},
         "split 64": {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": "64"}}
# (rows, length): packed short rows (one step, remainder only), odd lengths, one long row per workgroup
# with whole unrolled steps and a remainder, few long rows split, one row, a huge row
GRID = [(37, 5), (300, 40), (9, 255), (5, 1001), (64, 2048), (3, 4099), (24, 8193), (64, 9000), (64, 9001),
        (200, 8196), (1, 3), (1, 100_003), (2, 1 << 18)]


@pytest.fixture(params=sorted(PLANS))
def plan(request, monkeypatch):
    monkeypatch.delenv("RUMUS_WGPU_ROW_SPLIT_WORKGROUPS", raising=False)
    for k, v in PLANS[request.param].items():
        monkeypatch.setenv(k, v)
    return request.param


def _covers(p, rlen: int, per: int) -> None:
    assert p.chunk % per == 0 and p.splits * p.chunk >= rlen > (p.splits - 1) * p.chunk
    assert p.group & (p.group - 1) == 0 and 1 <= p.group <= WORKGROUP


@pytest.mark.parametrize("per", [1, 4])
@pytest.mark.parametrize("rows", [1, 2, 8, 63, 64, 127, 128, 255, 256, 512, 4096, 100_000])
@pytest.mark.parametrize("rlen", [1, 7, 100, 1024, 8192, 8193, 32000, 32001, 262144, 1 << 20, 1 << 24])
def test_plans_cover_every_row_and_respect_the_grid(rows, rlen, per):
    for max_groups in (65535, 16):
        p = plan_rows(rows, rlen, per, False, max_groups)
        _covers(p, rlen, per)
        assert p.splits <= max_groups
        assert p.unroll == UNROLL
        # splits only when a row fills a workgroup, is at least SPLIT_MIN_ROW long, and no chunk is
        # shorter than SPLIT_CHUNK / 2
        if p.splits > 1:
            assert p.group == WORKGROUP and p.chunk >= SPLIT_CHUNK // 2 and rlen >= SPLIT_MIN_ROW
    assert plan_rows(rows, rlen, per, False, 65535, target=0).splits == 1


def test_few_long_rows_split_into_the_target_many_rows_do_not():
    # 64 rows of 2**18: one workgroup a row would leave most of a 132-SM GPU idle
    p = plan_rows(64, 1 << 18, 4, False, 65535)
    assert p.splits >= 4 and p.workgroups * p.splits <= SPLIT_WORKGROUPS
    assert plan_rows(64, (1 << 18) + 1, 1, False, 65535).splits == p.splits  # odd lengths plan alike
    # the plan splits up to SPLIT_WORKGROUPS / 4 workgroups
    assert plan_rows(128, 1 << 17, 4, False, 65535).splits > 1
    assert plan_rows(512, 1 << 17, 4, False, 65535).splits == 1
    # rows under SPLIT_MIN_ROW stay whole (64 x 32000 ran faster unsplit on the H200)
    assert plan_rows(64, 32000, 4, False, 65535).splits == 1
    assert plan_rows(64, 32001, 1, False, 65535).splits == 1
    assert plan_rows(64, SPLIT_MIN_ROW, 4, False, 65535).splits > 1
    # enough rows to fill the GPU, or rows too short for two chunks: one pass
    assert plan_rows(512, 32000, 4, False, 65535).splits == 1
    assert plan_rows(64, 8192, 4, False, 65535).splits == 1
    # a huge row splits into up to SPLIT_WORKGROUPS chunks, more when the target asks
    assert plan_rows(1, 1 << 24, 4, False, 65535).splits == SPLIT_WORKGROUPS
    assert plan_rows(1, 1 << 24, 4, False, 65535, target=2048).splits == 2048
    # short rows pack several per workgroup, an outer-dim reduction over many rows keeps groups small
    assert plan_rows(4096, 40, 1, False, 65535).group == 16
    assert plan_rows(4096, 1000, 1, True, 65535).group == 16


def test_a_misspelt_switch_raises_naming_it(monkeypatch):
    monkeypatch.setenv("RUMUS_WGPU_ROW_SPLIT_WORKGROUPS", "lots")
    with pytest.raises(rm.RumusError, match="RUMUS_WGPU_ROW_SPLIT_WORKGROUPS"):
        rm.softmax(rm.tensor(np.ones((2, 3), np.float32), device=DEVICE), 1)


def _check(shape, dim, log, dtype="float32", rtol=None, atol=None) -> None:
    x = RNG.standard_normal(shape) * 6
    xd = rm.tensor(x.astype(np.float32), device=DEVICE).to(getattr(rm, dtype))
    got = (rm.log_softmax if log else rm.softmax)(xd, dim).to(rm.float32).numpy().astype(np.float64)
    t = torch.from_numpy(xd.to(rm.float32).numpy().astype(np.float64))
    want = (torch.log_softmax(t, dim) if log else torch.softmax(t, dim)).numpy()
    # float32 math: exp(x - m) carries about |x - m| * 2^-24 relative error, a few ulp more in the sum
    np.testing.assert_allclose(got, want, rtol=rtol or (2e-5 if log else 1e-5), atol=atol or (2e-5 if log else 1e-7),
                               err_msg=f"{'log_' if log else ''}softmax {shape} dim {dim} {dtype}")


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_every_branch_matches_float64(plan, log):
    for shape in GRID:
        _check(shape, 1, log)
    _check((6, 9001), 0, log)  # strided rows (scalar loads)
    # an offset view: contiguous rows starting at every alignment (the aligned body's head differs per row)
    base = RNG.standard_normal((9, 700)) * 6
    xd = rm.tensor(base.astype(np.float32), device=DEVICE)[1:, 3:]
    got = (rm.log_softmax if log else rm.softmax)(xd, 1).numpy()
    t = torch.from_numpy(base.astype(np.float32).astype(np.float64)[1:, 3:])
    want = (torch.log_softmax(t, 1) if log else torch.softmax(t, 1)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5 if log else 1e-5, atol=2e-5 if log else 1e-7)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_fused_backward_every_branch_matches_float64(plan, name):
    for shape in [(37, 5), (5, 1001), (64, 9000), (64, 9001), (1, 100_003)]:
        x, g = RNG.standard_normal(shape) * 3, RNG.standard_normal(shape)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        y = e / e.sum(axis=1, keepdims=True)
        y = y if name == "softmax" else np.log(y)
        y32, g32 = y.astype(np.float32).astype(np.float64), g.astype(np.float32).astype(np.float64)
        got = op(f"{name}_backward")(rm.tensor(g32, dtype="float32", device=DEVICE),
                                     rm.tensor(y32, dtype="float32", device=DEVICE), dim=1).numpy()
        want = (y32 * (g32 - (g32 * y32).sum(axis=1, keepdims=True)) if name == "softmax"
                else g32 - np.exp(y32) * g32.sum(axis=1, keepdims=True))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-6 * np.sqrt(shape[1]) + 1e-6,
                                   err_msg=f"{name}_backward {shape}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_rows(plan, dtype):
    if dtype == "float16" and not BACKEND.device(0).has_f16:
        pytest.skip("this adapter has no shader-f16")
    # the result is rounded to the dtype: half an ulp of a probability (up to 1), of a log-probability
    tol = {"float16": 1e-3, "bfloat16": 8e-3}[dtype]
    for shape in [(37, 5), (5, 1001), (64, 9000), (3, 9001), (1, 100_003)]:
        for log in (False, True):
            _check(shape, 1, log, dtype, rtol=tol, atol=tol * (4 if log else 0.01))


def test_the_plans_run_what_they_say(monkeypatch):
    # [128, 9000]: one unrolled pass under every split target; [16, 70000] (rows past SPLIT_MIN_ROW):
    # split (partial + final: two dispatches) with unrolled walks, one pass with the target 0
    seen = {}
    for shape in ((128, 9000), (16, 70000)):
        x = rm.tensor(RNG.standard_normal(shape).astype(np.float32), device=DEVICE)
        for name, env in (("default", {}), ("no split", {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": "0"})):
            monkeypatch.delenv("RUMUS_WGPU_ROW_SPLIT_WORKGROUPS", raising=False)
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            BACKEND.flush(0)
            before = BACKEND.stats(0)["dispatches"]
            y = rm.softmax(x, 1)
            BACKEND.flush(0)
            seen[name, shape[1]] = BACKEND.stats(0)["dispatches"] - before
            t = torch.from_numpy(x.numpy().astype(np.float64))
            np.testing.assert_allclose(y.numpy(), torch.softmax(t, 1).numpy(), rtol=1e-5, atol=1e-7)
    assert seen == {("default", 9000): 1, ("no split", 9000): 1, ("default", 70000): 2, ("no split", 70000): 1}
    keys = {(k[4], k[5]) for k in BACKEND.device(0).programs._cache
            if isinstance(k, tuple) and k[:4] == ("softmax", "softmax", "float32", True)}
    assert {("partial", UNROLL), ("final", UNROLL), ("single", UNROLL)} <= keys
    # an odd length: the fold pass reads the aligned body as vec4
    monkeypatch.delenv("RUMUS_WGPU_ROW_SPLIT_WORKGROUPS", raising=False)
    x = RNG.standard_normal((3, 1001))
    got = rm.softmax(rm.tensor(x.astype(np.float32), device=DEVICE), 1).numpy()
    want = torch.softmax(torch.from_numpy(x.astype(np.float32).astype(np.float64)), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    aligned = {k[6] for k in BACKEND.device(0).programs._cache
               if isinstance(k, tuple) and k[:5] == ("softmax", "softmax", "float32", False, "single")}
    assert True in aligned

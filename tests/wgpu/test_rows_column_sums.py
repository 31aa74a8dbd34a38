"""Reductions over a leading dim on wgpu (bias gradients: the column sums of [tokens, features]) take the
column kernel: coalesced reads, the rows split over the grid and folded in a fixed order. Values against
float64 for column counts around the vec4 width, the same bits on every run, strided and offset inputs. (Below
COLUMN_MIN_ELEMENTS the one-dispatch row kernel runs: it costs the host less.)"""

import numpy as np
import pytest

import rumus as rm
from rumus.ops import get as op
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(3)
COLUMNS = [1, 3, 4, 5, 255, 256, 257, 1000, 4096, 32001]


def test_the_column_kernel_runs():
    x = rm.tensor(RNG.standard_normal((256, 256)), dtype="float32", device=DEVICE)
    x.sum(0).numpy()
    keys = [k for k in x._arg.buffer.dev.programs._cache if isinstance(k, tuple) and k[0] == "reduce_columns"]
    assert keys, "sum over dim 0 did not take the column kernel"


@pytest.mark.parametrize("cols", COLUMNS)
@pytest.mark.parametrize("rows", [2, 9, 300, 2000])
def test_column_sums_match_float64(rows, cols):
    if rows * cols > 3_000_000:
        rows = 40
    x = RNG.standard_normal((rows, cols))
    got = rm.tensor(x, dtype="float32", device=DEVICE).sum(0).numpy()
    want = x.astype(np.float32).astype(np.float64).sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(rows))


@pytest.mark.parametrize("name", ["sum", "amax", "amin", "prod"])
def test_other_reductions_over_leading_dims(name):
    x = RNG.uniform(0.9, 1.1, (4, 300, 36))
    t = rm.tensor(x, dtype="float32", device=DEVICE)
    got = op(name)(t, dims=(0, 1)).numpy().reshape(-1)
    want = {"sum": np.sum, "amax": np.max, "amin": np.min, "prod": np.prod}[name](x.astype(np.float32), axis=(0, 1))
    np.testing.assert_allclose(got, want, rtol=2e-5)


def test_deterministic_run_to_run():
    x = rm.tensor(RNG.standard_normal((4096, 1024)), dtype="float32", device=DEVICE)
    first = x.sum(0).numpy()
    for _ in range(3):
        assert np.array_equal(x.sum(0).numpy(), first)


@pytest.mark.parametrize("novec", [False, True])
def test_strided_and_offset_inputs(novec, monkeypatch):
    if novec:
        monkeypatch.setenv("RUMUS_WGPU_NOVEC", "1")
    base = RNG.standard_normal((1100, 3, 40))
    t = rm.tensor(base, dtype="float32", device=DEVICE)
    view = t[5:, 1, 4:]  # rows of stride 120 starting at an odd offset, 36 contiguous columns
    b32 = base.astype(np.float32).astype(np.float64)
    tol = 1e-4 * np.sqrt(base.shape[0])  # float32 sums of about 1100 values of magnitude ~1
    np.testing.assert_allclose(view.sum(0).numpy(), b32[5:, 1, 4:].sum(0), rtol=1e-5, atol=tol)
    outer = t[:, :, 1::2]  # columns of stride 2: the row kernel's case, still right
    np.testing.assert_allclose(outer.sum(0).numpy(), b32[:, :, 1::2].sum(0), rtol=1e-5, atol=tol)


def test_float16_columns():
    x = RNG.standard_normal((1024, 40))
    try:
        t = rm.tensor(x, dtype="float16", device=DEVICE)
        got = t.sum(0).numpy()
    except rm.DTypeError:
        pytest.skip("no shader-f16 on this adapter")
    np.testing.assert_allclose(got.astype(np.float64), x.astype(np.float16).astype(np.float64).sum(0), rtol=2e-3,
                               atol=0.1)

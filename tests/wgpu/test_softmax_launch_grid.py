"""softmax/log_softmax on wgpu launch one row group per row. A regression counted every output element
as a row (the output keeps the row dim), so a [64, C] softmax ran C times too many workgroups, each
recomputing a row: right values, cubic time on lavapipe and 11.8 s for [4096, 32000] on an H200."""

import struct

import numpy as np
import pytest

import rumus as rm
from rumus import BackendUnavailable
from rumus.nn import functional as F

try:
    BACKEND = rm._runtime.backend("wgpu")
    BACKEND.devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "dim"), [((64, 2048), 1), ((3, 5, 7), 1), ((8, 1000), 0)])
def test_one_group_per_row(op: str, shape: tuple[int, ...], dim: int) -> None:
    x = rm.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32), device="wgpu:0")
    y = getattr(F, op)(x, dim=dim)
    y.numpy()
    dev = y._arg.buffer.dev
    plans = [v for k, v in dev.launch_plans.items() if k[0] == op and k[5] == tuple(shape) and k[10] == dim]
    assert plans, "the launch was not cached"
    _prog, data, grid = plans[-1]
    rows_word, rlen, group = struct.unpack_from("<3I", data)
    expected_rows = int(np.prod(shape)) // shape[dim]
    assert (rows_word, rlen) == (expected_rows, shape[dim])
    rows_per_group = 256 // group
    groups = grid[0] * grid[1]
    assert groups * rows_per_group >= expected_rows > (groups - 1) * rows_per_group

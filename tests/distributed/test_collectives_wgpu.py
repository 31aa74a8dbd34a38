"""Collectives take tensors of any backend: a rank on wgpu and a rank on cpu meet through host staging.

(Two in-process ranks driving the *same* wgpu device from two threads left the WebGPU backend broken
for later tests — a pooled buffer came back without its GPU handle — so that is not tested here and
not supported until rumus_wgpu is reviewed for use from several threads.)"""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
import rumus.distributed as dist
from rumus import BackendUnavailable, backend_api
from rumus.distributed import ReduceOp

try:
    backend_api.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)


def test_all_reduce_between_a_wgpu_rank_and_a_cpu_rank() -> None:
    def run(c: dist.InProcessCommunicator) -> tuple[str, np.ndarray, np.ndarray]:
        t = rm.tensor([1.0, 2.0, 3.0], device=c.device) * (c.rank + 1)
        dist.all_reduce(t, ReduceOp.SUM)
        g = dist.all_gather(rm.tensor([float(c.rank)], device=c.device))
        return str(t.device), t.numpy(), g.numpy()
    res = dist.spawn(run, 2, devices=["wgpu:0", "cpu"])
    assert res[0][0].startswith("wgpu") and res[1][0].startswith("cpu")
    for _, t, g in res:
        np.testing.assert_array_equal(t, [3.0, 6.0, 9.0])
        np.testing.assert_array_equal(g, [[0.0], [1.0]])


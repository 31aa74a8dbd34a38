"""Collectives take tensors of any backend: ranks on wgpu and on cpu meet through host staging,
and DDP averages gradients of a model on wgpu (lavapipe in CI)."""

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


def test_ddp_on_wgpu_averages_gradients() -> None:
    def run(c: dist.InProcessCommunicator) -> np.ndarray:
        model = rm.nn.Linear(3, 2, device="wgpu")
        ddp = dist.DistributedDataParallel(model, c)
        x = rm.full((4, 3), float(c.rank + 1), device="wgpu")
        ddp(x).sum().backward()
        assert model.weight.grad is not None and str(model.weight.grad.device).startswith("wgpu")
        return model.weight.grad.numpy()
    for g in dist.spawn(run, 2):
        np.testing.assert_allclose(g, np.full((2, 3), 6.0), rtol=1e-6)  # mean of 4*1 and 4*2 per entry

"""FSDP (ZeRO-3): sharded parameters, gradients and optimizer state; training matches single process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mpi_run import NEEDS_MPIRUN, launch_and_load
import pytest
from fsdp_case import IN, OUT, H, train_fsdp, train_single

import rumus as rm
import rumus.distributed as dist
from rumus.distributed.fsdp import FullyShardedDataParallel as FSDP

TOTAL = (IN * H + H) + (H * H + H) + (H * OUT + OUT)


def _assert_matches(results: list[dict[str, np.ndarray]]) -> None:
    expected = train_single()
    for r, got in enumerate(results):
        for n, e in expected.items():
            np.testing.assert_allclose(got[n], e, rtol=1e-5, atol=1e-5, err_msg=f"rank {r} {n}")


def test_fsdp_in_process_matches_single_process() -> None:
    res = dist.spawn(train_fsdp, 2)
    _assert_matches(res)
    # each rank holds half of every unit (padded): parameters, and so gradients and Adam's state
    units = [IN * H + H, H * H + H, H * OUT + OUT]
    assert res[0]["shard_numel"] == sum(-(-u // 2) for u in units) <= TOTAL // 2 + len(units)


@NEEDS_MPIRUN
def test_fsdp_over_mpi_matches_single_process(tmp_path: Path) -> None:
    _assert_matches([dict(f) for f in launch_and_load("mpi_fsdp_main.py", tmp_path)])


def test_fsdp_keeps_no_full_parameter_between_steps_and_optimizer_state_is_sharded() -> None:
    def run(c: dist.InProcessCommunicator) -> tuple[list[str], int, list[int]]:
        unit = FSDP(rm.nn.Linear(6, 4), c)
        opt = rm.optim.Adam(unit.parameters(), lr=0.1)
        unit(rm.ones(3, 6)).sum().backward()
        grad_numel = unit.flat_param.grad.numel()
        opt.step()  # (drains .grad)
        opt.zero_grad()
        state_sizes = [int(v.numel()) for st in opt.state.values() for v in st.values()
                       if isinstance(v, rm.Tensor) and v.ndim > 0]
        return [n for n, _ in unit.named_parameters()], grad_numel, state_sizes
    names, grad_numel, state_sizes = dist.spawn(run, 2)[0]
    assert names == ["flat_param"] and grad_numel == 14  # (6*4 + 4) / 2
    assert state_sizes and all(n == 14 for n in state_sizes)


def test_sharded_checkpoint_round_trip_and_wrong_rank_refused() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        unit = FSDP(rm.nn.Linear(3, 2), c)
        state = unit.sharded_state_dict()
        before = unit.full_state_dict()["weight"].numpy()
        with rm.no_grad():
            unit.flat_param.mul_(0)
        unit.load_sharded_state_dict(state)
        np.testing.assert_array_equal(unit.full_state_dict()["weight"].numpy(), before)
        with pytest.raises(dist.CommunicatorError, match="rank"):
            unit.load_sharded_state_dict({**state, "rank": 1 - c.rank})
    dist.spawn(run, 2)

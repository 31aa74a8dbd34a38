"""torch.distributed's names: init_process_group / destroy_process_group, collectives in torch's argument
forms, under a real `rumus launch -n 2` (MPI) with torchrun's environment variables, and single-process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rumus as torch
import rumus.distributed as dist

SCRIPT = textwrap.dedent("""
    import os
    import rumus as torch
    import rumus.distributed as dist
    from rumus.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert (rank, world) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) == (int(os.environ["RANK"]), 2)
    assert int(os.environ["LOCAL_RANK"]) == rank and os.environ["MASTER_ADDR"] and os.environ["MASTER_PORT"]
    t = torch.tensor([float(rank + 1)] * 3)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    assert t.tolist() == [3.0, 3.0, 3.0], t.tolist()
    parts = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(parts, torch.tensor([rank, 10.0 * rank]))
    assert [p.tolist() for p in parts] == [[0.0, 0.0], [1.0, 10.0]]
    b = torch.tensor([7.0 if rank == 0 else 0.0])
    dist.broadcast(b, src=0)
    assert b.item() == 7.0
    model = DDP(torch.nn.Linear(3, 1))
    model(torch.ones(4, 3) * (rank + 1)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()
    print("rank", rank, "ok", flush=True)
""")


def test_a_torchrun_style_script_runs_under_rumus_launch(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    out = subprocess.run([sys.executable, "-m", "rumus.cli", "launch", "-n", "2", "--timeout", "240", str(script)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "rank 0 ok" in out.stdout and "rank 1 ok" in out.stdout


def test_single_process_group_without_a_launcher() -> None:
    dist.init_process_group("gloo", init_method="env://")
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        t = torch.ones(2)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0]
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group("gloo")
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_several_processes_outside_mpi_are_refused_with_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(dist.CommunicatorError, match="rumus launch -n 4"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()

"""DDP over MPI: two CPU ranks started by `rumus launch -n 2` (mpirun) from a subprocess."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from ddp_case import train_single
from mpi_run import NEEDS_MPIRUN, launch, launch_and_load

pytestmark = NEEDS_MPIRUN


@pytest.mark.parametrize("bucket_cap_mb", [25.0, 0.0005])  # one bucket; a bucket per ~128 floats
def test_ddp_over_mpi_matches_single_process(tmp_path: Path, bucket_cap_mb: float) -> None:
    ranks = launch_and_load("mpi_ddp_main.py", tmp_path, str(bucket_cap_mb))
    expected = train_single()
    for r, got in enumerate(ranks):
        arrays = [got[f"arr_{i}"] for i in range(len(expected))]
        for a, e in zip(arrays, expected):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
    for i in range(len(expected)):  # replicas stay identical, bit for bit
        np.testing.assert_array_equal(ranks[0][f"arr_{i}"], ranks[1][f"arr_{i}"])


@pytest.mark.timing
def test_a_rank_that_raises_stops_every_rank() -> None:
    start = time.monotonic()
    done = launch("mpi_fail_main.py", timeout=120)
    assert done.returncode != 0
    assert "boom from rank 1" in done.stderr
    assert "rank 0 should never get here" not in done.stdout
    assert time.monotonic() - start < 60  # the abort ended it, not the 60 s collective timeout


def test_launch_dry_run_sets_each_ranks_device() -> None:
    from rumus.distributed.launch import mpirun_command, rank_device
    cmd = mpirun_command(4, "train.py", ["--x", "1"], device="wgpu", hostfile="hosts", mpirun="mpirun")
    assert cmd[:3] == ["mpirun", "-n", "4"] and "--hostfile" in cmd and "RUMUS_DIST_DEVICE=wgpu" in cmd
    assert cmd[-3:] == ["train.py", "--x", "1"]
    assert rank_device("wgpu", {"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == "wgpu:3"
    assert rank_device("cpu", {"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == "cpu"


def test_launch_passes_the_scripts_own_options_through(capsys: pytest.CaptureFixture[str]) -> None:
    from rumus.distributed.launch import main
    assert main(["-n", "2", "--dry-run", "train.py", "--d", "3", "--device", "x", "-n", "9"]) == 0
    line = capsys.readouterr().out.split()
    assert line[line.index("-n") + 1] == "2"
    assert line[-7:] == ["train.py", "--d", "3", "--device", "x", "-n", "9"]


def test_mpi_communicator_collectives() -> None:
    done = launch("mpi_port_main.py", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 OK" in done.stdout and "rank 1 OK" in done.stdout

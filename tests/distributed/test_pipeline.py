"""1F1B pipeline parallel: the schedule, and training that matches single-process (in-process, MPI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mpi_run import NEEDS_MPIRUN, launch_and_load
from pp_case import MICRO, train_pipeline, train_single

import rumus.distributed as dist
from rumus.distributed.pipeline import one_f_one_b


def test_one_f_one_b_schedule() -> None:
    F, B = "F", "B"
    assert one_f_one_b(0, 2, 4) == [(F, 0), (F, 1), (B, 0), (F, 2), (B, 1), (F, 3), (B, 2), (B, 3)]
    assert one_f_one_b(1, 2, 4) == [(F, 0), (B, 0), (F, 1), (B, 1), (F, 2), (B, 2), (F, 3), (B, 3)]
    for stages in (1, 2, 4):
        for stage in range(stages):
            for m in (1, 3, 8):
                order = one_f_one_b(stage, stages, m)
                assert sorted(order) == sorted([(F, i) for i in range(m)] + [(B, i) for i in range(m)])
                live = peak = 0
                for kind, _ in order:
                    live += 1 if kind == F else -1
                    peak = max(peak, live)
                assert peak == min(stages - stage, m)  # 1F1B's memory bound (GPipe: m)


def _assert_matches(results: list[list[np.ndarray]]) -> None:
    expected = train_single()
    for r, got in enumerate(results):
        assert len(got) == len(expected[r])
        for a, e in zip(got, expected[r]):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=f"stage {r}")


def test_pipeline_in_process_matches_single_process() -> None:
    res = dist.spawn(train_pipeline, 2)
    _assert_matches([r[0] for r in res])
    assert res[0][1] == one_f_one_b(0, 2, MICRO) and res[1][1] == one_f_one_b(1, 2, MICRO)
    assert res[1][2] and not res[0][2]  # the loss is known on the last stage only


@NEEDS_MPIRUN
def test_pipeline_over_mpi_matches_single_process(tmp_path: Path) -> None:
    loaded = launch_and_load("mpi_pp_main.py", tmp_path)
    _assert_matches([[f[f"arr_{i}"] for i in range(len(f.files))] for f in loaded])

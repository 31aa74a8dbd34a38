"""A DataLoader worker that exits, dies or returns what cannot be sent: a WorkerError in the caller that names
the worker and the sample, never the script ending with the worker's exit status or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import numpy as np
import pytest

from rumus.data import DataLoader, Dataset, WorkerError

WORKER_MODES = ["thread", "process"]


class _ExitsAt(Dataset):
    def __init__(self, bad: int, how: str = "exit0") -> None:
        self.bad, self.how = bad, how

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> Any:
        if i == self.bad:
            if self.how == "exit0":
                sys.exit(0)
            if self.how == "interrupt":
                raise KeyboardInterrupt
            os._exit(0)
        return np.full(3, i, np.float32)


class _Unpicklable(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        return {"x": np.zeros(2, np.float32), "lock": threading.Lock() if i == 5 else 0}


def _collate_keep(samples: list[Any]) -> list[Any]:
    return samples


@pytest.mark.parametrize("mode", WORKER_MODES)
@pytest.mark.parametrize("how", ["exit0", "interrupt"])
def test_sys_exit_in_getitem_is_a_worker_error_naming_the_worker_and_sample(mode: str, how: str) -> None:
    loader = DataLoader(_ExitsAt(9, how), batch_size=4, num_workers=2, worker_mode=mode, timeout=60)
    seen = []
    with pytest.raises(WorkerError, match=r"DataLoader worker .*batch 2, sample index 9") as info:
        for batch in loader:
            seen.append(batch.numpy()[:, 0].tolist())
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7]]  # the batches before the failing one, in order
    assert ("SystemExit" if how == "exit0" else "KeyboardInterrupt") in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_a_worker_process_that_dies_names_its_pid_and_the_batch() -> None:
    loader = DataLoader(_ExitsAt(9, "os_exit"), batch_size=4, num_workers=2, worker_mode="process", timeout=60)
    with pytest.raises(WorkerError, match=r"worker process 0 \(pid \d+\) exited unexpectedly while fetching batch 2, "
                                          r"sample index 9 with exit code 0"):
        list(loader)


def test_an_unpicklable_sample_names_its_type_instead_of_hanging() -> None:
    loader = DataLoader(_Unpicklable(), batch_size=2, num_workers=2, worker_mode="process",
                        collate_fn=_collate_keep, timeout=60)
    with pytest.raises(WorkerError, match=r"batch 2 \(sample indices \[4, 5\]\).*the batch\[1\]\['lock'\] of type "
                                          r"_thread.lock cannot be pickled"):
        list(loader)
    # threads need no pickling: the same dataset loads
    batches = list(DataLoader(_Unpicklable(), batch_size=2, num_workers=2, collate_fn=_collate_keep, timeout=60))
    assert len(batches) == 4


def test_a_script_whose_worker_calls_sys_exit_0_fails_with_a_nonzero_status() -> None:
    """The issue's case end to end: before, the training script ended with status 0 in the middle of an epoch."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from rumus.data import DataLoader, Dataset
        class D(Dataset):
            def __len__(self): return 16
            def __getitem__(self, i):
                if i == 9: sys.exit(0)
                return np.zeros(2, np.float32)
        for mode in (sys.argv[1],):
            for _ in DataLoader(D(), batch_size=4, num_workers=2, worker_mode=mode, timeout=60):
                pass
        print("EPOCH COMPLETED")
    """)
    for mode in WORKER_MODES:
        proc = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "RUMUS_BACKEND": "cpu"})
        assert proc.returncode == 1 and "EPOCH COMPLETED" not in proc.stdout, (mode, proc.stdout, proc.stderr)
        assert "WorkerError" in proc.stderr and "sample index 9" in proc.stderr

"""Run by `rumus launch -n 2 mpi_fsdp_main.py OUT_DIR`: each rank saves the gathered weights."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from fsdp_case import train_fsdp  # noqa: E402

import rumus.distributed as dist  # noqa: E402

comm = dist.init_mpi(timeout_s=60)
res = train_fsdp(comm)
res.pop("shard_numel")
np.savez(Path(sys.argv[1]) / f"rank{comm.rank}.npz", **res)

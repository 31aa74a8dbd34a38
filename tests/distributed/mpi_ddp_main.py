"""Run by `rumus launch -n 2 mpi_ddp_main.py OUT_DIR [bucket_cap_mb]`: each rank saves its trained
parameters to OUT_DIR/rank<r>.npz."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from ddp_case import train_ddp  # noqa: E402

import rumus.distributed as dist  # noqa: E402

comm = dist.init_mpi(timeout_s=60)
cap = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
result = train_ddp(comm, bucket_cap_mb=cap)
np.savez(Path(sys.argv[1]) / f"rank{comm.rank}.npz", *result)

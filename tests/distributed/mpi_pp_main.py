"""Run by `rumus launch -n 2 mpi_pp_main.py OUT_DIR`: each stage saves its trained parameters."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from pp_case import train_pipeline  # noqa: E402

import rumus.distributed as dist  # noqa: E402

comm = dist.init_mpi(timeout_s=60)
np.savez(Path(sys.argv[1]) / f"rank{comm.rank}.npz", *train_pipeline(comm)[0])

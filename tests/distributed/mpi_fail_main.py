"""Run by `rumus launch -n 2 mpi_fail_main.py`: rank 1 raises while rank 0 waits in an all_reduce."""

import numpy as np

import rumus.distributed as dist

comm = dist.init_mpi(timeout_s=60)
if comm.rank == 1:
    raise ValueError("boom from rank 1")
comm.all_reduce(np.ones(4, np.float32))
print("rank 0 should never get here")

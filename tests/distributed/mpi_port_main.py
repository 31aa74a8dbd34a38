"""Run by `rumus launch -n 2 mpi_port_main.py`: the MPI communicator satisfies the port and each
collective gives the expected values; prints OK from every rank."""

import numpy as np

import rumus.distributed as dist
from rumus.distributed import ReduceOp

comm = dist.init_mpi(timeout_s=30)
r = comm.rank
assert isinstance(comm, dist.Communicator) and comm.world_size == 2
for op, want in ((ReduceOp.SUM, [3.0, -2.0]), (ReduceOp.AVG, [1.5, -1.0]), (ReduceOp.MAX, [2.0, 0.0]),
                 (ReduceOp.MIN, [1.0, -2.0])):
    b = np.array([1.0 + r, -2.0 * r], np.float32)
    comm.all_reduce(b, op)
    assert b.tolist() == want, (op, b)
flags = np.array([r == 0, True])
comm.all_reduce(flags, ReduceOp.MAX)
assert flags.tolist() == [True, True]
b = np.full(3, float(r))
comm.broadcast(b, src=1)
assert b.tolist() == [1.0] * 3
g = np.empty((2, 2), np.int64)
comm.all_gather(np.array([r, 10 * r], np.int64), g)
assert g.tolist() == [[0, 0], [1, 10]]
rs = np.empty(2, np.float32)
comm.reduce_scatter(np.arange(4, dtype=np.float32) * (r + 1), rs, ReduceOp.SUM)
assert rs.tolist() == (np.arange(4) * 3.0)[2 * r:2 * r + 2].tolist()
if r == 0:
    comm.send(np.array([7.0, 8.0]), 1, tag=5)
else:
    got = np.empty(2)
    w = comm.recv(got, 0, tag=5, async_op=True)
    w.wait()
    assert got.tolist() == [7.0, 8.0] and w.is_completed()
comm.barrier()
print(f"rank {r} OK", flush=True)

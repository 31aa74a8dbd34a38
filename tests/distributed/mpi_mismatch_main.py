"""Run by `rumus launch -n 2 mpi_mismatch_main.py`: the ranks pass disagreeing tensors to each collective;
every rank must raise CommunicatorError (caught here and printed), then a matching call still works."""


import numpy as np

import rumus as rm
import rumus.distributed as dist

comm = dist.init_mpi(timeout_s=60)
r = comm.rank
cases = {
    "all_reduce dtype": lambda: dist.all_reduce(rm.ones(4) if r == 0 else rm.ones(4, dtype=rm.int64)),
    "all_reduce size": lambda: dist.all_reduce(rm.ones(4 + 3 * r)),
    "all_reduce shape": lambda: dist.all_reduce(rm.ones(2, 3) if r == 0 else rm.ones(3, 2)),
    "all_reduce op": lambda: dist.all_reduce(rm.ones(4), op=dist.ReduceOp.SUM if r else dist.ReduceOp.MAX),
    "broadcast size": lambda: dist.broadcast(rm.ones(5 + r * 2_000_000)),
    "broadcast src": lambda: dist.broadcast(rm.ones(3), src=r),
    "all_gather dtype": lambda: dist.all_gather(rm.ones(3) if r == 0 else rm.ones(3, dtype=rm.float64)),
    "all_gather shape": lambda: dist.all_gather(rm.ones(2 + r)),
    "reduce_scatter shape": lambda: dist.reduce_scatter(rm.ones(4 + 2 * r)),
    "different collectives": lambda: dist.all_reduce(rm.ones(4)) if r == 0 else dist.broadcast(rm.ones(4)),
}
for name, fn in cases.items():
    try:
        fn()
        print(f"rank {r} {name}: ACCEPTED", flush=True)
    except dist.CommunicatorError as exc:
        ok = "the ranks disagree" in str(exc) and "rank 0:" in str(exc) and "rank 1:" in str(exc)
        print(f"rank {r} {name}: {'REFUSED' if ok else 'UNCLEAR ' + str(exc)}", flush=True)
# point to point: rank 1 expects 4 int64 where rank 0 sends 3 float32; only the receiver can tell
if r == 0:
    dist.send(rm.ones(3), dst=1, tag=5)  # the sender cannot know: only rank 1 reports a verdict
else:
    try:
        dist.recv(rm.zeros(4, dtype=rm.int64), src=0, tag=5)
        print("rank 1 recv mismatch: ACCEPTED", flush=True)
    except dist.CommunicatorError as exc:
        ok = "rank 0 sent float32 (3,)" in str(exc) and "int64 (4,)" in str(exc)
        print(f"rank 1 recv mismatch: {'REFUSED' if ok else 'UNCLEAR ' + str(exc)}", flush=True)
    comm.recv(np.empty(3, np.float32), 0, 5)  # the payload that was not read, so nothing is left unmatched
t = rm.full((4,), float(r + 1))
dist.all_reduce(t)
print(f"rank {r} after: {t.numpy().tolist()}", flush=True)

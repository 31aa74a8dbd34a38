"""`rumus launch -n 2 benchmarks/pp_bubble.py M`: the measured bubble of a 2-stage 1F1B pipeline with M
micro-batches (time blocked in receives / step time, median of 4 steps) next to (p-1)/(m+p-1)."""

import sys
import time

import numpy as np

import rumus as rm
import rumus.distributed as dist
from rumus import nn
from rumus.distributed.pipeline import PipelineStage

comm = dist.init_mpi()
m, width, per = int(sys.argv[1]), 768, 64
rm.manual_seed(0)
stage = PipelineStage(nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(4)]), comm)
xs = [rm.randn(per, width) for _ in range(m)]
ys = [rm.randn(per, width) for _ in range(m)]
fractions = []
for step in range(6):
    comm.barrier()
    t0 = time.perf_counter()
    stage.train_step(xs if stage.is_first else None, ys if stage.is_last else None, nn.functional.mse_loss, m)
    dt = time.perf_counter() - t0
    if step >= 2:
        fractions.append(stage.recv_wait_s / dt)
p = comm.world_size
print(f"rank {comm.rank} m={m} bubble={np.median(fractions):.3f} theory={(p - 1) / (m + p - 1):.3f}", flush=True)

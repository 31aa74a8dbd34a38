"""DDP scaling of a small language model: `python benchmarks/ddp_scale.py` (1 rank, no DDP) vs
`rumus launch -n 2 --device wgpu benchmarks/ddp_scale.py --ddp` (one GPU per rank). Weak scaling: every
rank runs the same per-rank batch; prints tokens/s, and the all-reduce bandwidth of a 64 MiB tensor
(staged through host memory, the way DDP's buckets travel)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import rumus as rm
import rumus.distributed as dist
from rumus import backend_api, nn


class LM(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ups = nn.ModuleList([nn.Linear(d, 4 * d) for _ in range(layers)])
        self.downs = nn.ModuleList([nn.Linear(4 * d, d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: rm.Tensor) -> rm.Tensor:
        h = self.emb(ids)
        for up, down in zip(self.ups, self.downs):
            h = h + down(rm.nn.functional.gelu(up(h)))
        return self.head(h)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=4096, help="tokens per rank per step")
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    comm = None
    if a.ddp:
        comm = dist.init_mpi()
    rm.manual_seed(0)
    dev = backend_api.default_device()  # RUMUS_BACKEND: rumus launch sets wgpu:<local rank> per rank
    model = LM(a.vocab, a.d, a.layers).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    run = dist.DistributedDataParallel(model, comm) if comm is not None else model
    opt = rm.optim.SGD(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0 if comm is None else comm.rank)
    ids = rm.tensor(rng.integers(0, a.vocab, a.tokens), dtype=rm.int64, device=dev)
    tgt = rm.tensor(rng.integers(0, a.vocab, a.tokens), dtype=rm.int64, device=dev)
    times = []
    for step in range(a.steps + 3):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(run(ids), tgt)
        loss.backward()
        opt.step()
        loss.item()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    step_s = float(np.median(times))
    world = 1 if comm is None else comm.world_size
    out = {"ranks": world, "device": str(dev), "params": n_params, "step_s": step_s,
           "tokens_per_s": a.tokens * world / step_s}
    if comm is not None:
        t = rm.ones(16 << 20, device=dev)  # 64 MiB of float32
        host = np.ones(16 << 20, np.float32)
        for name, fn in (("allreduce_staged_GBps", lambda: dist.all_reduce(t)),
                         ("allreduce_host_GBps", lambda: comm.all_reduce(host))):
            fn()
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(5):
                fn()
            # algorithm bandwidth: bytes of the buffer / time per all-reduce
            out[name] = 64 * 2**20 / ((time.perf_counter() - t0) / 5) / 1e9
    if comm is None or comm.rank == 0:
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

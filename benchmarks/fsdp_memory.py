"""`python benchmarks/fsdp_memory.py`: bytes each rank holds (parameters + gradients + Adam state) for
8 Linear(512, 512) units, unsharded vs FSDP over N in-process ranks, counted after one step."""

from typing import Any

import rumus as rm
import rumus.distributed as dist
from rumus import nn
from rumus.distributed.fsdp import FullyShardedDataParallel as FSDP


def run(comm: Any) -> int:
    layers = [nn.Linear(512, 512) for _ in range(8)]
    model = nn.Sequential(*[FSDP(m, comm) for m in layers]) if comm else nn.Sequential(*layers)
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)
    model(rm.randn(16, 512)).sum().backward()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    opt.step()  # drains .grad, creates the state
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    state = sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
                if isinstance(v, rm.Tensor))
    return params + grads + state


full = run(None)
print(f"unsharded: {full / 2**20:.2f} MiB")
for n in (2, 4):
    per = dist.spawn(run, n)[0]
    print(f"FSDP N={n}: {per / 2**20:.2f} MiB per rank = {per / full:.3f} of unsharded (1/N = {1 / n:.3f})")

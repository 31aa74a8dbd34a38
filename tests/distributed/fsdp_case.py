"""An MLP whose Linear layers are FSDP units, trained with SGD + momentum on each rank's half of every batch,
against single-process training on the whole batch (mean loss): the gathered weights must match."""

from __future__ import annotations

from typing import Any

import numpy as np
from sgd_reference import train_mse_sgd

import rumus as rm
from rumus import nn
from rumus.distributed import Communicator
from rumus.distributed.fsdp import FullyShardedDataParallel as FSDP

STEPS, BATCH, IN, H, OUT = 5, 8, 5, 9, 3  # 9: parameter counts that do not divide by 2 (padding)


def layers(seed: int) -> list[nn.Module]:
    rng = np.random.default_rng(seed)
    mods: list[nn.Module] = [nn.Linear(IN, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(), nn.Linear(H, OUT)]
    with rm.no_grad():
        for m in mods:
            for p in m.parameters():
                p.copy_(rm.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
    return mods


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    return (rng.normal(size=(STEPS, BATCH, IN)).astype(np.float32),
            rng.normal(size=(STEPS, BATCH, OUT)).astype(np.float32))


def train_single() -> dict[str, np.ndarray]:
    model = nn.Sequential(*layers(0))
    x, y = data()
    train_mse_sgd(model, x, y, lr=0.1)
    return {n: p.detach().numpy() for n, p in model.named_parameters()}


def train_fsdp(comm: Communicator) -> dict[str, Any]:
    """Rank r starts from seed r (FSDP broadcasts rank 0's); returns the gathered weights and sizes."""
    mods = [FSDP(m, comm) if isinstance(m, nn.Linear) else m for m in layers(comm.rank)]
    model = nn.Sequential(*mods)
    x, y = data()
    per = BATCH // comm.world_size
    lo = comm.rank * per
    train_mse_sgd(model, x[:, lo:lo + per], y[:, lo:lo + per], lr=0.1)
    out: dict[str, Any] = {}
    for i, m in enumerate(mods):
        if isinstance(m, FSDP):
            for n, t in m.full_state_dict().items():
                out[f"{i}.{n}"] = t.numpy()
    out["shard_numel"] = sum(p.numel() for p in model.parameters())
    return out

"""One training problem, trained three ways: single process on the full batch, and DDP with each
rank on its slice of the batch (over MPI or in-process ranks). Averaged gradients of equal slices
equal the full batch's gradient, so all three must end on the same parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

import rumus as rm
from rumus import nn
from rumus.distributed import Communicator, DistributedDataParallel

STEPS, BATCH, IN, HIDDEN, OUT = 6, 8, 5, 16, 3


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, OUT)

    def forward(self, x: Any) -> Any:
        return self.fc3(rm.tanh(self.fc2(rm.tanh(self.fc1(x)))))


def make_model(seed: int) -> MLP:
    """Weights from numpy's RNG, so a rank's model depends only on `seed`."""
    model = MLP()
    rng = np.random.default_rng(seed)
    with rm.no_grad():
        for p in model.parameters():
            p.copy_(rm.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(STEPS, BATCH, IN)).astype(np.float32)
    y = rng.normal(size=(STEPS, BATCH, OUT)).astype(np.float32)
    return x, y


def params(model: nn.Module) -> list[np.ndarray]:
    return [p.detach().numpy() for p in model.parameters()]


def train_single() -> list[np.ndarray]:
    model = make_model(0)
    opt = rm.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    for s in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(rm.from_numpy(x[s])), rm.from_numpy(y[s]))
        loss.backward()
        opt.step()
    return params(model)


def train_ddp(comm: Communicator, bucket_cap_mb: float = 25.0, accumulate: bool = False) -> list[np.ndarray]:
    """Rank r starts from a *different* init (seed r): DDP's initial broadcast must fix that.
    With `accumulate`, each rank's slice is split in two micro-batches, the first under no_sync()."""
    model = DistributedDataParallel(make_model(comm.rank), comm, bucket_cap_mb=bucket_cap_mb)
    opt = rm.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    per = BATCH // comm.world_size
    lo = comm.rank * per
    for s in range(STEPS):
        opt.zero_grad()
        xs, ys = x[s, lo:lo + per], y[s, lo:lo + per]
        if accumulate:
            half = per // 2
            with model.no_sync():
                (nn.functional.mse_loss(model(rm.from_numpy(xs[:half])), rm.from_numpy(ys[:half])) * 0.5).backward()
            (nn.functional.mse_loss(model(rm.from_numpy(xs[half:])), rm.from_numpy(ys[half:])) * 0.5).backward()
        else:
            nn.functional.mse_loss(model(rm.from_numpy(xs)), rm.from_numpy(ys)).backward()
        opt.step()
        opt.zero_grad()
    return params(model.module)

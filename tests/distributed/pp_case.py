"""An MLP trained single-process on whole batches and as a 2-stage 1F1B pipeline on micro-batches;
each stage's parameters must end equal to the same layers of the single-process model."""

from __future__ import annotations

import numpy as np
from sgd_reference import train_mse_sgd

import rumus as rm
from rumus import nn
from rumus.distributed import Communicator
from rumus.distributed.pipeline import PipelineStage

STEPS, BATCH, MICRO, IN, H, OUT = 4, 8, 4, 5, 8, 3


def layers() -> list[nn.Module]:
    rng = np.random.default_rng(3)
    mods: list[nn.Module] = [nn.Linear(IN, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(),
                             nn.Linear(H, OUT)]
    with rm.no_grad():
        for m in mods:
            for p in m.parameters():
                p.copy_(rm.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
    return mods


CUT = 4  # stage 0: layers[:4], stage 1: layers[4:]


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    return (rng.normal(size=(STEPS, BATCH, IN)).astype(np.float32),
            rng.normal(size=(STEPS, BATCH, OUT)).astype(np.float32))


def train_single() -> list[list[np.ndarray]]:
    mods = layers()
    train_mse_sgd(nn.Sequential(*mods), *data(), lr=0.1)
    return [[p.detach().numpy() for m in part for p in m.parameters()] for part in (mods[:CUT], mods[CUT:])]


def train_pipeline(comm: Communicator) -> tuple[list[np.ndarray], list[tuple[str, int]], list[float]]:
    mods = layers()
    part = mods[:CUT] if comm.rank == 0 else mods[CUT:]
    stage = PipelineStage(nn.Sequential(*part), comm)
    opt = rm.optim.SGD(stage.module.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    per = BATCH // MICRO
    losses: list[float] = []
    for s in range(STEPS):
        opt.zero_grad()
        xs = [rm.from_numpy(x[s, i * per:(i + 1) * per]) for i in range(MICRO)]
        ys = [rm.from_numpy(y[s, i * per:(i + 1) * per]) for i in range(MICRO)]
        loss = stage.train_step(xs if stage.is_first else None, ys if stage.is_last else None,
                                nn.functional.mse_loss, MICRO)
        if loss is not None:
            losses.append(loss)
        opt.step()
    order = [(k, i) for k, i, _, _ in stage.timeline]
    return [p.detach().numpy() for p in stage.module.parameters()], order, losses

"""rumus.multiprocessing: shared-memory tensors and Hogwild training (the pattern of PyTorch's mnist_hogwild
example: model.share_memory(), then mp.Process(target=train, args=(model, ...)) per worker), with spawn and
fork; non-shared tensors go by value."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as torch
import rumus.multiprocessing as mp
from rumus import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def train(rank: int, model: Net, steps: int) -> None:
    torch.manual_seed(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 4)
    y = x.sum(1, keepdim=True)  # the target weights are all ones
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def write_rank(rank: int, t: torch.Tensor) -> None:
    with torch.no_grad():
        t[rank] = float(rank + 1)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_hogwild_workers_train_the_parents_weights(method: str) -> None:
    ctx = mp.get_context(method)
    model = Net()
    with torch.no_grad():
        model.fc.weight.zero_()
    model.share_memory()
    assert model.fc.weight.is_shared() and model.fc.bias.is_shared()
    workers = [ctx.Process(target=train, args=(r, model, 40)) for r in range(2)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert [p.exitcode for p in workers] == [0, 0]
    w = model.fc.weight.numpy()
    np.testing.assert_allclose(w, np.ones((1, 4)), atol=0.2)  # trained in the children, seen by the parent


def test_spawn_runs_each_rank_and_writes_shared_memory() -> None:
    t = torch.zeros(3).share_memory_()
    mp.spawn(write_rank, args=(t,), nprocs=3)
    assert t.tolist() == [1.0, 2.0, 3.0]


def test_spawn_reraises_a_childs_error() -> None:
    with pytest.raises(mp.ProcessRaisedException, match="ZeroDivisionError"):
        mp.spawn(_fail, nprocs=1)


def _fail(rank: int) -> None:
    _ = 1 / 0


def test_a_tensor_that_is_not_shared_is_sent_by_value() -> None:
    t = torch.zeros(3)
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=write_rank, args=(0, t))
    p.start()
    p.join(120)
    assert p.exitcode == 0 and t.tolist() == [0.0, 0.0, 0.0]


def test_a_dtype_pickled_in_one_process_keys_lookups_in_another() -> None:
    """String hashes differ between processes: a dtype must not carry its sender's cached hash."""
    import os
    import pickle
    import subprocess
    import sys
    blob = pickle.dumps(torch.float32).hex()
    code = (f"import pickle, rumus as rm; d = pickle.loads(bytes.fromhex({blob!r})); "
            "assert d in frozenset({rm.float32}) and hash(d) == hash(rm.float32); print('ok')")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]

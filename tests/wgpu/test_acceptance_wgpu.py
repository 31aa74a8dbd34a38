"""SPEC A1/A3/A5 properties on the WebGPU backend: one host sync per training step (the loss read),
and the buffer pool serving every allocation after the first step."""

from backends_under_test import wgpu_backend_or_skip
from tiny_models import XorMLP, three_class_data

import rumus as rm
from rumus import nn

BACKEND = wgpu_backend_or_skip()
DEVICE = "wgpu:0"


def _xor_setup():
    rm.manual_seed(0)
    model = XorMLP().to(DEVICE)
    x = rm.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], device=DEVICE)
    y = rm.tensor([[0.0], [1.0], [1.0], [0.0]], device=DEVICE)
    opt = rm.optim.Adam(model.parameters(), lr=0.01)
    return model, x, y, opt


def _step(model, x, y, opt, loss_fn) -> float:
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return float(loss.item())


def test_xor_loss_read_is_the_only_sync_per_step_and_it_converges():
    model, x, y, opt = _xor_setup()
    loss_fn = nn.MSELoss()
    _step(model, x, y, opt, loss_fn)
    dev = rm.device(DEVICE)
    before = dict(BACKEND.stats(dev))
    losses = [_step(model, x, y, opt, loss_fn) for _ in range(199)]
    after = BACKEND.stats(dev)
    assert after["syncs"] - before["syncs"] == 199  # exactly the 199 loss reads
    assert after["submits"] - before["submits"] == 199
    assert losses[-1] < 0.01


def test_a5_buffer_pool_serves_allocations_after_the_first_step():
    model, x, y, opt = _xor_setup()
    loss_fn = nn.MSELoss()
    dev = rm.device(DEVICE)
    _step(model, x, y, opt, loss_fn)
    _step(model, x, y, opt, loss_fn)  # optimizer state exists from step 1 on
    before = dict(BACKEND.pool_stats(dev))
    for _ in range(10):
        _step(model, x, y, opt, loss_fn)
    after = BACKEND.pool_stats(dev)
    assert after["misses"] == before["misses"], "later steps allocated new GPU buffers"
    assert after["hits"] - before["hits"] >= 10 * 20  # every step's temporaries came from the pool


def test_a3_classifier_syncs_once_per_step():
    rm.manual_seed(0)
    x, y = three_class_data(DEVICE)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(DEVICE)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    _step(model, x, y, opt, loss_fn)
    dev = rm.device(DEVICE)
    before = BACKEND.stats(dev)["syncs"]
    losses = [_step(model, x, y, opt, loss_fn) for _ in range(199)]
    assert BACKEND.stats(dev)["syncs"] - before == 199
    assert losses[-1] < 0.15

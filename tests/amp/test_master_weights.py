"""Master weights: a float16 model trains through float32 copies held by its optimizer; updates too
small for float16 still accumulate; the model and its checkpoint keep float16."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import nn

from ._devices import device_for
from ._spec import a3_a4


def test_small_updates_accumulate_in_the_master_copy() -> None:
    dev = device_for(rm.float16)
    # at 1.0 float16's spacing is 2**-10: an update of 1e-4 applied to the float16 value is lost
    assert np.float16(1.0) + np.float16(1e-4) == np.float16(1.0)
    mastered = rm.ones(8, device=dev).to(rm.float16).requires_grad_(True)
    opt_master = rm.optim.SGD([mastered], lr=1e-4, master_weights=True)
    for _ in range(20):
        (mastered.float() * -1.0).sum().backward()  # gradient -1: each step adds 1e-4
        assert mastered.grad.dtype == rm.float16
        opt_master.step()
        opt_master.zero_grad()
    assert mastered.dtype == rm.float16
    master = opt_master.state[id(mastered)]["master_param"]
    assert master.dtype == rm.float32
    np.testing.assert_allclose(master.numpy(), 1.002, rtol=1e-6)
    np.testing.assert_array_equal(mastered.float().numpy(), np.float16(1.002).astype(np.float32))


@pytest.mark.parametrize("low", [rm.float16, rm.bfloat16], ids=lambda d: d.name)
def test_half_model_with_master_weights_trains_a3_and_checkpoints_in_its_dtype(tmp_path, low: rm.DType) -> None:
    dev = device_for(low)
    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    model = model.half() if low == rm.float16 else model.bfloat16()
    opt = rm.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01, master_weights=True)
    scaler = rm.amp.GradScaler(enabled=low == rm.float16)  # bfloat16 has float32's range
    x, y = a3_a4.three_class_data()
    x, y = x.to(dev).to(low), y.to(dev)
    loss = None
    for _ in range(200):
        loss = nn.functional.cross_entropy(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    final = float(loss.item())
    assert final < 0.15, f"A3 with a {low} model and master weights: final loss {final}"
    assert all(p.dtype == low for p in model.parameters())
    sd = model.state_dict()
    assert all(v.dtype == low for v in sd.values())
    for p in model.parameters():
        master = opt.state[id(p)]["master_param"]
        np.testing.assert_array_equal(p.float().numpy(), master.to(low).float().numpy())
    path = tmp_path / "model.pt"
    rm.save({"model": sd, "opt": opt.state_dict()}, str(path))
    back = rm.load(str(path))
    assert all(v.dtype == low for v in back["model"].values())
    assert all(s["master_param"].dtype == rm.float32 for s in back["opt"]["state"].values())

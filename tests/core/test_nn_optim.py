"""Module registration, state_dict, optimizers (drain semantics), safetensors I/O."""

import os

import numpy as np
import pytest
from tiny_models import XorMLP

import rumus as rm
from rumus import RumusError, ShapeError, nn


def test_registration_and_names():
    net = XorMLP()
    assert [n for n, _ in net.named_parameters()] == ["hidden.weight", "hidden.bias", "output.weight", "output.bias"]
    assert net.hidden.weight.shape == (8, 2)  # PyTorch layout [out, in]
    assert len(list(net.children())) == 2 and len(list(net.modules())) == 3
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert "Linear(in_features=3" in repr(seq)
    seq.eval()
    assert not seq[0].training


def test_load_state_dict_errors_leave_model_untouched():
    net = XorMLP()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    sd = dict(net.state_dict())
    del sd["output.bias"]
    with pytest.raises(RumusError, match="output.bias"):
        net.load_state_dict(sd)
    sd = {k: v.clone() for k, v in net.state_dict().items()}
    sd["hidden.weight"] = rm.zeros(3, 3)
    sd["output.weight"] = rm.zeros(1, 8)
    with pytest.raises(ShapeError, match="hidden.weight"):
        net.load_state_dict(sd)
    for k, v in net.state_dict().items():
        assert np.array_equal(v.numpy(), before[k]), k
    missing, unexpected = net.load_state_dict({"output.bias": rm.ones(1)}, strict=False)
    assert "hidden.weight" in missing and net.output.bias.item() == 1.0


def test_linear_matches_numpy():
    lin = nn.Linear(5, 3)
    x = rm.randn(4, 5)
    want = x.numpy() @ lin.weight.numpy().T + lin.bias.numpy()
    np.testing.assert_allclose(lin(x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_draining_optimizer_drains_its_own_gradients_only():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    opt_a = rm.optim.SGD(a.parameters(), lr=0.1)
    opt_a.drain_grads = True  # RUMUS's opt-in; torch's rule (grads kept) is the default
    x = rm.randn(3, 2)
    (a(x).sum() + b(x).sum()).backward()
    w_before = a.weight.numpy().copy()
    opt_a.step()
    assert a.weight.grad is None and b.weight.grad is not None
    assert not np.array_equal(a.weight.numpy(), w_before)


def test_optimizer_skips_parameters_without_gradients():
    net = XorMLP()
    opt = rm.optim.Adam(net.parameters(), lr=0.01)
    net.hidden(rm.randn(1, 2)).sum().backward()  # output layer gets no gradient
    before = net.output.weight.numpy().copy()
    opt.step()
    assert np.array_equal(net.output.weight.numpy(), before)


def test_sgd_momentum_matches_torch_formula():
    p = nn.Parameter(rm.tensor([1.0, -2.0]))
    opt = rm.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    ref_p, buf = np.array([1.0, -2.0]), None
    for _ in range(3):
        (p * p).sum().backward()
        opt.step()
        opt.zero_grad()
        g = 2 * ref_p + 0.01 * ref_p
        buf = g if buf is None else 0.9 * buf + g
        ref_p = ref_p - 0.1 * (g + 0.9 * buf)
    np.testing.assert_allclose(p.numpy(), ref_p, rtol=1e-6)


def test_safetensors_round_trip_and_atomic(tmp_path):
    net = XorMLP()
    path = tmp_path / "m.safetensors"
    rm.io.save_file(net.state_dict(), path)
    loaded = rm.io.load_file(path)
    assert set(loaded) == set(net.state_dict())
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]
    from safetensors.numpy import load_file as st_load
    raw = st_load(str(path))
    np.testing.assert_array_equal(raw["hidden.weight"], net.hidden.weight.numpy())


def test_corrupt_safetensors_is_a_format_error(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\xff" * 20)
    with pytest.raises(rm.FormatError, match="corrupt"):
        rm.io.load_file(path)
    path.write_bytes(b"abc")
    with pytest.raises(rm.FormatError, match="not a safetensors"):
        rm.io.load_file(path)


def test_buffers_stay_registered_when_reassigned():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", rm.zeros(2))
            self.tmp = nn.Buffer(rm.ones(1), persistent=False)

    m = M()
    m.running = rm.ones(2)
    assert m.running.tolist() == [1.0, 1.0]
    assert list(m.state_dict()) == ["running"]
    assert [n for n, _ in m.named_buffers()] == ["running", "tmp"]

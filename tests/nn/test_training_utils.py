"""Training ergonomics: gradient accumulation, clip_grad_norm_, LR schedulers (against PyTorch), activation
checkpointing, Trainer checkpoints/resume/callbacks, dropout determinism, embedding and indexing details."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import rumus as rm
from rumus import FormatError, ShapeError, nn
from rumus.nn import functional as F
from rumus.optim import lr_scheduler as rsched
from rumus.train import Callback, EarlyStopping, Trainer, accuracy
from rumus.utils import checkpoint, checkpoint_sequential

DEVICE = rm.default_device()


def mlp(seed: int = 0) -> nn.Module:
    rm.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 3)).to(DEVICE)


def data(n: int = 16, seed: int = 1) -> tuple[rm.Tensor, rm.Tensor]:
    rng = np.random.default_rng(seed)
    return (rm.tensor(rng.standard_normal((n, 4)).astype(np.float32), device=DEVICE),
            rm.tensor(rng.integers(0, 3, n), device=DEVICE))


def params(m: nn.Module) -> list[np.ndarray]:
    return [p.numpy() for p in m.parameters()]


# ---- gradient accumulation ------------------------------------------------------------------------------

@pytest.mark.parametrize("opt_name", ["SGD", "AdamW"])
def test_gradient_accumulation_equals_one_full_batch_step(opt_name):
    x, y = data()
    full, accum = mlp(), mlp()
    kw = {"lr": 0.1} if opt_name == "SGD" else {"lr": 0.01}
    opt_full = getattr(rm.optim, opt_name)(full.parameters(), **kw)
    opt_acc = getattr(rm.optim, opt_name)(accum.parameters(), **kw)
    for _ in range(3):
        F.cross_entropy(full(x), y).backward()
        opt_full.step()
        opt_full.zero_grad()
        for half in (slice(0, 8), slice(8, 16)):  # grads accumulate until zero_grad()
            (F.cross_entropy(accum(x[half]), y[half]) * 0.5).backward()
        opt_acc.step()
        opt_acc.zero_grad()
    for a, b in zip(params(full), params(accum)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_trainer_grad_accum_steps_matches_full_batch():
    x, y = data()
    full, accum = mlp(), mlp()
    t_full = Trainer(full, rm.optim.AdamW(full.parameters(), lr=0.01), F.cross_entropy, progress=False)
    t_acc = Trainer(accum, rm.optim.AdamW(accum.parameters(), lr=0.01), F.cross_entropy, grad_accum_steps=2,
                    progress=False)
    t_full.fit([(x, y)] * 2, epochs=1)
    t_acc.fit([(x[:8], y[:8]), (x[8:], y[8:])] * 2, epochs=1)
    assert t_full.global_step == t_acc.global_step == 2 and t_acc.micro_step == 4
    for a, b in zip(params(full), params(accum)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---- clip_grad_norm_ ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_type,max_norm", [(2.0, 0.5), (2.0, 1e3), (math.inf, 0.1), (1.0, 0.3)])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,), (2, 2, 2))]
    rp = [rm.zeros(*g.shape, device=DEVICE, requires_grad=True) for g in grads]
    tp = [torch.zeros(*g.shape, requires_grad=True) for g in grads]
    for p, q, g in zip(rp, tp, grads):
        p.grad = rm.tensor(g, device=DEVICE)
        q.grad = torch.tensor(g)
    norm_r = nn.utils.clip_grad_norm_(rp, max_norm, norm_type)
    norm_t = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    assert isinstance(norm_r, rm.Tensor) and norm_r.shape == ()  # a device tensor; reading it is the caller's call
    np.testing.assert_allclose(float(norm_r), float(norm_t), rtol=1e-6)
    for p, q in zip(rp, tp):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_value_():
    p = rm.zeros(4, device=DEVICE, requires_grad=True)
    p.grad = rm.tensor([-3.0, -0.5, 0.2, 9.0], device=DEVICE)
    nn.utils.clip_grad_value_([p], 1.0)
    assert p.grad.tolist() == [-1.0, -0.5, pytest.approx(0.2), 1.0]


# ---- LR schedulers against PyTorch ---------------------------------------------------------------------------

SCHEDULES = {
    "StepLR": (lambda o: rsched.StepLR(o, 3, 0.5), "StepLR", dict(step_size=3, gamma=0.5)),
    "MultiStepLR": (lambda o: rsched.MultiStepLR(o, [2, 5, 5], 0.3), "MultiStepLR",
                    dict(milestones=[2, 5, 5], gamma=0.3)),
    "ExponentialLR": (lambda o: rsched.ExponentialLR(o, 0.9), "ExponentialLR", dict(gamma=0.9)),
    "CosineAnnealingLR": (lambda o: rsched.CosineAnnealingLR(o, 7, 1e-4), "CosineAnnealingLR",
                          dict(T_max=7, eta_min=1e-4)),
    "LinearLR": (lambda o: rsched.LinearLR(o, 0.1, 1.0, 4), "LinearLR",
                 dict(start_factor=0.1, end_factor=1.0, total_iters=4)),
    "ConstantLR": (lambda o: rsched.ConstantLR(o, 0.5, 3), "ConstantLR", dict(factor=0.5, total_iters=3)),
    "OneCycleLR": (lambda o: rsched.OneCycleLR(o, 0.1, total_steps=12), "OneCycleLR",
                   dict(max_lr=0.1, total_steps=12)),
    "LambdaLR": (lambda o: rsched.LambdaLR(o, lambda e: 0.5 ** e), "LambdaLR", dict(lr_lambda=lambda e: 0.5 ** e)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_scheduler_matches_torch(name):
    torch = pytest.importorskip("torch")
    make_r, torch_name, kw = SCHEDULES[name]
    p_r = rm.zeros(2, device=DEVICE, requires_grad=True)
    p_t = torch.zeros(2, requires_grad=True)
    opt_r = rm.optim.AdamW([p_r], lr=0.05)
    opt_t = torch.optim.AdamW([p_t], lr=0.05)
    s_r, s_t = make_r(opt_r), getattr(torch.optim.lr_scheduler, torch_name)(opt_t, **kw)
    for _ in range(11):
        assert s_r.get_last_lr() == pytest.approx(s_t.get_last_lr(), rel=1e-12, abs=1e-15)
        assert opt_r.param_groups[0]["lr"] == pytest.approx(opt_t.param_groups[0]["lr"], rel=1e-12, abs=1e-15)
        assert tuple(opt_r.param_groups[0]["betas"]) == pytest.approx(tuple(opt_t.param_groups[0]["betas"]))
        opt_r.step()
        opt_r.zero_grad()
        opt_t.step()
        opt_t.zero_grad()
        s_r.step()
        s_t.step()


def test_sequential_lr_matches_torch_and_state_dict_round_trips_through_json():
    torch = pytest.importorskip("torch")
    p_r, p_t = rm.zeros(1, device=DEVICE, requires_grad=True), torch.zeros(1, requires_grad=True)
    opt_r, opt_t = rm.optim.SGD([p_r], lr=0.1), torch.optim.SGD([p_t], lr=0.1)
    s_r = rsched.SequentialLR(opt_r, [rsched.LinearLR(opt_r, 0.01, 1.0, 3), rsched.CosineAnnealingLR(opt_r, 6)], [3])
    tsch = torch.optim.lr_scheduler
    s_t = tsch.SequentialLR(opt_t, [tsch.LinearLR(opt_t, 0.01, 1.0, 3), tsch.CosineAnnealingLR(opt_t, 6)], [3])
    lrs_r, lrs_t = [], []
    for _ in range(9):
        lrs_r.append(s_r.get_last_lr()[0])
        lrs_t.append(s_t.get_last_lr()[0])
        opt_t.step()
        opt_t.zero_grad()
        s_r.step()
        s_t.step()
    np.testing.assert_allclose(lrs_r, lrs_t, rtol=1e-12, atol=1e-15)
    state = json.loads(json.dumps(s_r.state_dict()))
    p2 = rm.zeros(1, device=DEVICE, requires_grad=True)
    opt2 = rm.optim.SGD([p2], lr=0.1)
    s2 = rsched.SequentialLR(opt2, [rsched.LinearLR(opt2, 0.01, 1.0, 3), rsched.CosineAnnealingLR(opt2, 6)], [3])
    s2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = s2.get_last_lr()[0]
    s_r.step()
    s2.step()
    assert s2.get_last_lr() == pytest.approx(s_r.get_last_lr())


# ---- activation checkpointing ------------------------------------------------------------------------------

def test_checkpoint_gradients_equal_plain_backward_and_keep_no_inner_graph():
    block = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.3), nn.Linear(8, 4)).to(DEVICE)
    x_np = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)

    def run(use_checkpoint: bool) -> tuple[list[np.ndarray], np.ndarray, rm.Tensor]:
        for p in block.parameters():
            p.grad = None
        rm.manual_seed(11)  # same dropout masks in both runs
        x = rm.tensor(x_np, device=DEVICE, requires_grad=True)
        out = checkpoint(block, x) if use_checkpoint else block(x)
        (out * out).sum().backward()
        return [p.grad.numpy() for p in block.parameters()], x.grad.numpy(), out

    grads_plain, gx_plain, _ = run(False)
    grads_ckpt, gx_ckpt, out = run(True)
    assert out.grad_fn is not None and out.grad_fn.name == "checkpoint"
    assert all(e is None or not hasattr(e[0], "name") for e in out.grad_fn.edges)  # straight to the leaf input
    np.testing.assert_allclose(gx_ckpt, gx_plain, rtol=1e-6, atol=1e-7)
    for a, b in zip(grads_ckpt, grads_plain):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_checkpoint_gives_parameters_gradients_without_input_grad_and_sequential():
    layers = [nn.Linear(3, 3).to(DEVICE) for _ in range(4)]
    x = rm.randn(2, 3, device=DEVICE)
    out = checkpoint_sequential(layers, 2, x)
    out.sum().backward()
    assert all(layer.weight.grad is not None for layer in layers)
    with rm.no_grad():
        assert checkpoint(layers[0], x).grad_fn is None


def test_checkpoint_refuses_inputs_modified_in_place():
    lin = nn.Linear(3, 3).to(DEVICE)
    x = rm.randn(2, 3, device=DEVICE, requires_grad=True)
    h = x * 1.0
    out = checkpoint(lin, h)
    with rm.no_grad():
        h.add_(1.0)
    with pytest.raises(rm.AutogradError, match="modified in place"):
        out.sum().backward()


# ---- Trainer: checkpoints, resume, callbacks, evaluate ------------------------------------------------------

def make_trainer(seed: int = 0, **kw) -> Trainer:
    model = mlp(seed)
    opt = rm.optim.AdamW(model.parameters(), lr=0.01)
    sched = rsched.CosineAnnealingLR(opt, 10)
    return Trainer(model, opt, nn.CrossEntropyLoss(), scheduler=sched, progress=False, **kw)


def test_trainer_checkpoint_resume_continues_exactly(tmp_path):
    x, y = data(24)
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 24, 8)]
    straight = make_trainer()
    straight.fit(batches, epochs=3)

    first = make_trainer()
    first.fit(batches, epochs=1, max_steps=2)  # stops mid-epoch
    ckpt = str(tmp_path / "ckpt")
    first.save_checkpoint(ckpt)
    sidecar = json.load(open(os.path.join(ckpt, "trainer.json")))
    assert sidecar["step"] == 2 and sidecar["trainer"]["batch_in_epoch"] == 2
    resumed = make_trainer(seed=5)  # different init: everything must come from the checkpoint
    resumed.load_checkpoint(ckpt)
    resumed.fit(batches, epochs=3)
    assert resumed.global_step == straight.global_step == 9
    assert resumed.scheduler.get_last_lr() == pytest.approx(straight.scheduler.get_last_lr())
    for a, b in zip(params(resumed.model), params(straight.model)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # a second save replaces the tensors file; a corrupted one is refused
    resumed.save_checkpoint(ckpt)
    files = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
    assert files == ["state-9.safetensors"]
    with open(os.path.join(ckpt, files[0]), "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(FormatError, match="SHA-256"):
        make_trainer().load_checkpoint(ckpt)


def test_trainer_callbacks_evaluate_metrics_and_progress(capsys):
    events: list[str] = []

    class Recorder(Callback):
        def on_fit_begin(self, trainer):
            events.append("begin")

        def on_step_end(self, trainer, step, loss):
            events.append(f"step{step}")

        def on_epoch_end(self, trainer, epoch, logs):
            events.append(f"epoch{epoch}:{sorted(logs)}")

        def on_fit_end(self, trainer):
            events.append("end")

    x, y = data(32)
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)]
    trainer = make_trainer(callbacks=[Recorder(), EarlyStopping("val_loss", patience=100)], metrics={"acc": accuracy},
                           log_every=1)
    trainer.progress = True
    history = trainer.fit(batches, epochs=2, eval_data=batches)
    assert events[0] == "begin" and events[-1] == "end" and "step8" in events
    assert events[5].startswith("epoch1:") and "val_acc" in events[5] and "samples_per_s" in events[5]
    assert len(history) == 2 and 0.0 <= history[-1]["val_acc"] <= 1.0
    logs = trainer.evaluate(batches)
    assert set(logs) == {"loss", "acc"} and math.isfinite(logs["loss"])


# ---- dropout -----------------------------------------------------------------------------------------------

def test_dropout_masks_are_deterministic_counter_based_and_scaled():
    x = rm.ones(64, 128, device=DEVICE)
    a = F.dropout(x, 0.25, seed=1234)
    b = F.dropout(x, 0.25, seed=1234)
    c = F.dropout(x, 0.25, seed=1235)
    assert np.array_equal(a.numpy(), b.numpy()) and not np.array_equal(a.numpy(), c.numpy())
    vals = np.unique(a.numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.75], rtol=1e-6)
    assert abs((a.numpy() == 0).mean() - 0.25) < 0.02
    # the mask is the contract's reference hash: any backend reproduces it from (seed, offset, index)
    from rumus_contracts.ops.nn import dropout_keep
    np.testing.assert_array_equal(a.numpy().reshape(-1) != 0, dropout_keep(x.numel(), 0.25, 1234, 0))
    # offset shifts the counter: a tensor's second half equals a dropout of the second half at offset n/2
    half = F.dropout(rm.ones(32, 128, device=DEVICE), 0.25, seed=1234, offset=32 * 128)
    np.testing.assert_array_equal(half.numpy(), a.numpy()[32:])
    rm.manual_seed(7)
    d1 = F.dropout(x, 0.5).numpy()
    rm.manual_seed(7)
    assert np.array_equal(F.dropout(x, 0.5).numpy(), d1)


def test_dropout_module_modes_and_gradient():
    drop = nn.Dropout(0.4).to(DEVICE)
    x = rm.randn(10, 10, device=DEVICE, requires_grad=True)
    drop.eval()
    assert drop(x) is x
    drop.train()
    y = drop(x)
    y.backward(rm.ones(10, 10, device=DEVICE))
    mask = (y.numpy() != 0)
    np.testing.assert_allclose(x.grad.numpy(), mask / 0.6, rtol=1e-6)
    assert F.dropout(x, 1.0).numpy().max() == 0.0 and F.dropout(x, 0.0) is x


# ---- embedding / indexing details ------------------------------------------------------------------------

def test_embedding_refuses_out_of_range_indices_and_accumulates_repeats():
    emb = nn.Embedding(5, 3).to(DEVICE)
    with pytest.raises(ShapeError, match="out of range"):
        emb(rm.tensor([0, 5], device=DEVICE))
    with pytest.raises(ShapeError, match="out of range"):
        emb(rm.tensor([-1], device=DEVICE))
    out = emb(rm.tensor([1, 1, 1, 4], device=DEVICE))
    out.sum().backward()
    np.testing.assert_allclose(emb.weight.grad.numpy()[:, 0], [0, 3, 0, 0, 1])


def test_index_select_gather_scatter_methods():
    x = rm.arange(12, dtype=rm.float32, device=DEVICE).reshape(3, 4).requires_grad_()
    idx = rm.tensor([2, 0, 2], device=DEVICE)
    sel = x.index_select(0, idx)
    np.testing.assert_array_equal(sel.numpy(), x.numpy()[[2, 0, 2]])
    g = x.gather(1, rm.tensor([[3], [0], [1]], device=DEVICE))
    np.testing.assert_array_equal(g.numpy()[:, 0], [3, 4, 9])
    (sel.sum() + g.sum()).backward()
    want = np.zeros((3, 4))
    want[2] += 2
    want[0] += 1
    want[0, 3] += 1
    want[1, 0] += 1
    want[2, 1] += 1
    np.testing.assert_array_equal(x.grad.numpy(), want)
    oh = F.one_hot(rm.tensor([0, 2, 1], device=DEVICE), 3)
    np.testing.assert_array_equal(oh.numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])


def test_activation_backward_without_fused_kernel_and_double_backward(monkeypatch):
    from rumus.autograd import kernel_lookup
    x_np = np.linspace(-3, 3, 13).astype(np.float64)
    for fn in (F.gelu, lambda t: F.gelu(t, approximate="tanh"), F.silu, lambda t: F.leaky_relu(t, 0.1),
               lambda t: F.softplus(t, 1.5, 2.0), lambda t: F.elu(t, 0.8)):
        x = rm.tensor(x_np, device=DEVICE, requires_grad=True)
        (gx,) = rm.autograd.grad(fn(x).sum(), x)
        with monkeypatch.context() as m:  # a backend with only the forward kernel
            m.setattr(kernel_lookup, "has_kernel", lambda op, like: False)
            (gx2,) = rm.autograd.grad(fn(x).sum(), x)
        np.testing.assert_allclose(gx.numpy(), gx2.numpy(), rtol=1e-10, atol=1e-12)
    # second derivative of gelu: d/dx [Phi(x) + x phi(x)] = phi(x) (2 - x^2)
    x = rm.tensor(x_np, device=DEVICE, requires_grad=True)
    (g1,) = rm.autograd.grad(F.gelu(x).sum(), x, create_graph=True)
    (g2,) = rm.autograd.grad(g1.sum(), x)
    phi = np.exp(-0.5 * x_np ** 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(g2.numpy(), phi * (2 - x_np ** 2), rtol=1e-9, atol=1e-12)

"""PyTorch interop for the convolution, pooling and normalization layers: a CNN built and saved in
PyTorch (safetensors.torch) loads into the same architecture built from rumus.nn (rumus.io.load_file +
load_state_dict) and agrees on outputs, BatchNorm running statistics and the gradient of every
parameter, in train and eval mode; the other layers are checked the same way one by one.

Tolerances: float32 on both sides, outputs within rtol 1e-5 and gradients within rtol 1e-4; float64 on
both sides within rtol 1e-9. Each comparison also allows that fraction of the tensor's largest magnitude
(values crossing zero), and a floor of 1e-6 (float32) / 1e-12 (float64) for gradients that are zero in
exact arithmetic (a conv bias followed by BatchNorm in training mode) and rounding noise on both sides.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import nn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")  # torch's own note
st_torch = pytest.importorskip("safetensors.torch")

DEVICE = rm.default_device()
TOL = {"float32": (1e-5, 1e-4), "float64": (1e-9, 1e-9)}  # (outputs, gradients)
FLOOR = {"float32": 1e-6, "float64": 1e-12}


def close(got: rm.Tensor, want: Any, rtol: float, what: str) -> None:
    ref = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    floor = FLOOR.get(str(ref.dtype), 0.0)
    np.testing.assert_allclose(got.numpy(), ref, rtol=rtol, atol=max(rtol * scale, floor), err_msg=what)


def transfer(tmod: Any, rmod: nn.Module, tmp_path: Any, dtype: str) -> None:
    """PyTorch module -> safetensors file -> rumus module (same keys, same layouts)."""
    path = tmp_path / "weights.safetensors"
    st_torch.save_file({k: v.contiguous() for k, v in tmod.state_dict().items()}, str(path))
    loaded = rm.io.load_file(path, device=DEVICE)
    assert list(loaded) and set(loaded) == set(rmod.state_dict()), (sorted(loaded), sorted(rmod.state_dict()))
    rmod.load_state_dict(loaded)
    assert list(rmod.state_dict()) == list(tmod.state_dict())  # same names in the same order
    for k, v in tmod.state_dict().items():
        assert rmod.state_dict()[k].dtype == (rm.int64 if k.endswith("num_batches_tracked") else getattr(rm, dtype))
        assert rmod.state_dict()[k].shape == tuple(v.shape), k


def compare_step(tmod: Any, rmod: nn.Module, x: np.ndarray, dtype: str, what: str, input_grad: bool = True) -> None:
    """Forward, then backward of sum(out * c): outputs, input gradient and every parameter's gradient."""
    out_tol, grad_tol = TOL[dtype]
    tx = torch.tensor(x, requires_grad=input_grad)
    rx = rm.tensor(x, device=DEVICE, requires_grad=input_grad)
    ty, ry = tmod(tx), rmod(rx)
    close(ry, ty, out_tol, f"{what}: output")
    c = np.random.default_rng(1).uniform(-1, 1, tuple(ty.shape)).astype(x.dtype)
    (ty * torch.tensor(c)).sum().backward()
    (ry * rm.tensor(c, device=DEVICE)).sum().backward()
    if input_grad:
        close(rx.grad, tx.grad, grad_tol, f"{what}: input gradient")
    rparams = dict(rmod.named_parameters())
    for name, p in tmod.named_parameters():
        assert rparams[name].grad is not None, f"{what}: no gradient for {name}"
        close(rparams[name].grad, p.grad, grad_tol, f"{what}: gradient of {name}")
        p.grad = None
        rparams[name].grad = None


# ---- the CNN ----------------------------------------------------------------------------------------------

def cnn(lib: Any) -> Any:
    class Net(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = lib.nn.Conv2d(3, 8, 3, padding=1)
            self.bn1 = lib.nn.BatchNorm2d(8)
            self.conv2 = lib.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
            self.bn2 = lib.nn.BatchNorm2d(16, momentum=None)  # cumulative running averages
            self.pool = lib.nn.MaxPool2d(2)
            self.conv3 = lib.nn.Conv2d(16, 16, (3, 2), padding="same", bias=False)  # even kernel: asymmetric pad
            self.avg = lib.nn.AvgPool2d(2, stride=1)
            self.gap = lib.nn.AdaptiveAvgPool2d((2, 3))  # uneven, overlapping windows
            self.fc = lib.nn.Linear(16 * 2 * 3, 5)
            self.relu = lib.nn.ReLU()

        def forward(self, x: Any) -> Any:
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.pool(self.relu(self.bn2(self.conv2(x))))
            x = self.gap(self.avg(self.relu(self.conv3(x))))
            return self.fc(x.flatten(1))

    return Net()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cnn_from_pytorch_agrees_in_train_and_eval(tmp_path: Any, dtype: str) -> None:
    torch.manual_seed(0)
    tnet = cnn(torch).to(getattr(torch, dtype))
    rnet = cnn(rm).to(DEVICE, dtype)
    with torch.no_grad():  # non-trivial running statistics before the transfer
        tnet.train()(torch.randn(4, 3, 16, 16, dtype=getattr(torch, dtype)) * 2 + 0.5)
    transfer(tnet, rnet, tmp_path, dtype)
    x = np.random.default_rng(0).normal(0.3, 1.5, (4, 3, 16, 16)).astype(dtype)
    for step in range(2):  # training mode: batch statistics, running statistics updated
        compare_step(tnet.train(), rnet.train(), x if step == 0 else x * 0.5 - 0.1, dtype, f"train step {step}")
        for name, buf in tnet.named_buffers():
            close(dict(rnet.named_buffers())[name], buf, TOL[dtype][0], f"buffer {name}")
    compare_step(tnet.eval(), rnet.eval(), x, dtype, "eval")  # running statistics normalize
    assert float(rnet.bn2.num_batches_tracked.item()) == 3 == int(tnet.bn2.num_batches_tracked)


def test_rumus_cnn_state_dict_loads_into_pytorch(tmp_path: Any) -> None:
    """The other direction: rumus -> safetensors -> PyTorch gives the same outputs."""
    rm.manual_seed(0)
    rnet = cnn(rm).to(DEVICE).eval()
    tnet = cnn(torch).eval()
    path = tmp_path / "rumus.safetensors"
    rm.io.save_file(rnet.state_dict(), path)
    tnet.load_state_dict(st_torch.load_file(str(path)))
    x = np.random.default_rng(3).normal(size=(2, 3, 12, 12)).astype(np.float32)
    with rm.no_grad(), torch.no_grad():
        close(rnet(rm.tensor(x, device=DEVICE)), tnet(torch.tensor(x)), 1e-5, "rumus -> torch")


# ---- the other layers, one by one ------------------------------------------------------------------------

LAYERS: list[tuple[str, Any, tuple[int, ...]]] = [
    # (what, lambda lib: module, input shape)
    ("ConvTranspose2d stride/padding/output_padding/groups",
     lambda lib: lib.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 6)),
    ("ConvTranspose2d dilation, non-square kernel, no bias",
     lambda lib: lib.nn.ConvTranspose2d(3, 2, (2, 3), dilation=(2, 1), bias=False), (2, 3, 4, 4)),
    ("Conv2d dilation + padding, non-square", lambda lib: lib.nn.Conv2d(3, 4, (3, 2), padding=(2, 1), dilation=2),
     (2, 3, 7, 6)),
    ("Conv2d depthwise stride 2", lambda lib: lib.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4), (3, 4, 9, 7)),
    ("Conv2d padding='valid'", lambda lib: lib.nn.Conv2d(2, 3, 3, padding="valid"), (2, 2, 5, 5)),
    ("Conv1d stride/padding/groups", lambda lib: lib.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 11)),
    ("Conv1d padding='same' dilation, even kernel", lambda lib: lib.nn.Conv1d(3, 4, 4, padding="same", dilation=2),
     (2, 3, 10)),
    ("Conv2d unbatched input", lambda lib: lib.nn.Conv2d(3, 2, 3, padding=1), (3, 6, 5)),
    ("GroupNorm", lambda lib: lib.nn.GroupNorm(3, 6), (2, 6, 4, 5)),
    ("GroupNorm affine=False, 3-D input", lambda lib: lib.nn.GroupNorm(2, 4, affine=False), (3, 4, 7)),
    ("LayerNorm over two dims", lambda lib: lib.nn.LayerNorm((5, 6)), (2, 3, 5, 6)),
    ("LayerNorm no affine", lambda lib: lib.nn.LayerNorm(6, elementwise_affine=False), (4, 6)),
    ("LayerNorm bias=False", lambda lib: lib.nn.LayerNorm(6, bias=False, eps=1e-3), (2, 3, 6)),
    ("RMSNorm default eps", lambda lib: lib.nn.RMSNorm(6), (2, 3, 6)),
    ("RMSNorm two dims, eps", lambda lib: lib.nn.RMSNorm((3, 6), eps=1e-5), (2, 3, 6)),
    ("RMSNorm no affine", lambda lib: lib.nn.RMSNorm(6, elementwise_affine=False), (5, 6)),
    ("BatchNorm1d [N, C]", lambda lib: lib.nn.BatchNorm1d(5), (8, 5)),
    ("BatchNorm1d [N, C, L] no affine", lambda lib: lib.nn.BatchNorm1d(5, affine=False), (4, 5, 7)),
    ("BatchNorm2d without running stats", lambda lib: lib.nn.BatchNorm2d(3, track_running_stats=False), (4, 3, 3, 2)),
    ("MaxPool2d padding, ceil_mode", lambda lib: lib.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
     (2, 3, 8, 7)),
    ("MaxPool2d dilation", lambda lib: lib.nn.MaxPool2d((2, 3), stride=(1, 2), dilation=(2, 1)), (2, 2, 7, 9)),
    ("AvgPool2d ceil_mode, count_include_pad=False",
     lambda lib: lib.nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 8, 7)),
    ("AvgPool2d divisor_override", lambda lib: lib.nn.AvgPool2d(2, divisor_override=3), (2, 2, 6, 6)),
    ("AdaptiveAvgPool2d (None, 3)", lambda lib: lib.nn.AdaptiveAvgPool2d((None, 3)), (2, 3, 5, 7)),
    ("AdaptiveAvgPool2d 1", lambda lib: lib.nn.AdaptiveAvgPool2d(1), (2, 3, 5, 7)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("what", "make", "shape"), LAYERS, ids=[w for w, _, _ in LAYERS])
def test_layer_agrees_with_pytorch(tmp_path: Any, what: str, make: Any, shape: tuple[int, ...], dtype: str) -> None:
    torch.manual_seed(0)
    tmod = make(torch).to(getattr(torch, dtype))
    with torch.no_grad():  # affine parameters away from their ones/zeros defaults
        for p in tmod.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    rmod = make(rm).to(DEVICE, dtype)
    if list(tmod.state_dict()):
        transfer(tmod, rmod, tmp_path, dtype)
    x = np.random.default_rng(0).normal(0.2, 1.0, shape).astype(dtype)
    compare_step(tmod.train(), rmod.train(), x, dtype, what)
    compare_step(tmod.eval(), rmod.eval(), x, dtype, what + " (eval)")


def test_conv_transpose2d_output_size_matches_pytorch() -> None:
    torch.manual_seed(0)
    tmod = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    rmod = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).to(DEVICE)
    rmod.load_state_dict({k: rm.tensor(v.numpy(), device=DEVICE) for k, v in tmod.state_dict().items()})
    x = np.random.default_rng(0).normal(size=(1, 2, 4, 5)).astype(np.float32)
    for size in ((7, 9), (8, 10), (1, 3, 8, 9)):
        want = tmod(torch.tensor(x), output_size=size)
        got = rmod(rm.tensor(x, device=DEVICE), output_size=size)
        assert got.shape == tuple(want.shape)
        close(got, want, 1e-5, f"output_size={size}")
    with pytest.raises(rm.ShapeError, match="not reachable"):
        rmod(rm.tensor(x, device=DEVICE), output_size=(11, 9))

"""ResNet-18: a state dict written by torchvision (or, where torchvision cannot load, by the same
architecture transcribed from torch.nn with torchvision's names) loads into rumus_vision.models.resnet18
through a safetensors file and gives torch's outputs, in eval and train mode, with the direct and the
im2col convolutions; the loss gradients of train mode match torch's too.

Tolerances: float32 on both sides; logits within 1e-4 of their largest magnitude (18 layers of float32
convolutions summing up to 4608 products each, in different orders), gradients within 1e-3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus_vision import conv_mode_as
from rumus_vision.models import resnet18

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")
from torchvision_resnet import ResNet18, reference_resnet18, torchvision_resnet18  # noqa: E402

DEVICE = rm.default_device()
SIZE = 64 if DEVICE.backend == "cpu" else 32  # lavapipe runs WGSL on the CPU: a smaller image there


def _torch_model(seed: int) -> tuple[Any, str]:
    torch.manual_seed(seed)
    model, origin = reference_resnet18(num_classes=10)
    with torch.no_grad():  # non-trivial BatchNorm statistics and affine parameters
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.num_batches_tracked.fill_(3)
    return model, origin


def _load(model: Any, tmp_path: Path) -> rm.nn.Module:
    path = tmp_path / "resnet18.safetensors"
    st_torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    ours = resnet18(num_classes=10)
    ours.load_state_dict(rm.io.load_file(str(path)))  # strict: every key and shape must match
    return ours.to(DEVICE)


def _close(got: rm.Tensor, want: Any, rel: float, what: str) -> None:
    ref = want.detach().numpy()
    np.testing.assert_allclose(got.numpy(), ref, rtol=rel, atol=rel * float(np.abs(ref).max()), err_msg=what)


def test_state_dict_keys_and_shapes_are_torchvisions() -> None:
    want = {k: tuple(v.shape) for k, v in ResNet18(10).state_dict().items()}
    got = {k: tuple(v.shape) for k, v in resnet18(10).state_dict().items()}
    assert got == want
    assert "layer2.0.downsample.0.weight" in got and "layer4.1.bn2.num_batches_tracked" in got


def test_transcription_matches_torchvision_when_it_loads() -> None:
    real = torchvision_resnet18(10)
    if real is None:
        pytest.skip("torchvision cannot be imported here (missing, or built for another torch)")
    assert {k: tuple(v.shape) for k, v in real.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in ResNet18(10).state_dict().items()}


@pytest.mark.parametrize("mode", ["direct", "im2col"])
def test_eval_outputs_match_torch(mode: str, tmp_path: Path) -> None:
    model, origin = _torch_model(0)
    ours = _load(model, tmp_path).eval()
    x = np.random.default_rng(1).standard_normal((2, 3, SIZE, SIZE)).astype(np.float32)
    with torch.no_grad():
        want = model.eval()(torch.from_numpy(x))
    with conv_mode_as(mode), rm.no_grad():
        got = ours(rm.tensor(x, device=DEVICE))
    _close(got, want, 1e-4, f"logits ({origin}, {mode})")


@pytest.mark.parametrize("mode", ["direct", "im2col"])
def test_train_step_matches_torch(mode: str, tmp_path: Path) -> None:
    """Train mode (batch statistics), cross-entropy loss, gradients of every parameter, BN running stats."""
    model, origin = _torch_model(2)
    ours = _load(model, tmp_path).train()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, SIZE, SIZE)).astype(np.float32)
    y = rng.integers(0, 10, size=4)
    model.train()
    loss_t = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
    loss_t.backward()
    with conv_mode_as(mode):
        loss = rm.nn.functional.cross_entropy(ours(rm.tensor(x, device=DEVICE)), rm.tensor(y, device=DEVICE))
        loss.backward()
    assert abs(loss.item() - loss_t.item()) <= 1e-4 * abs(loss_t.item())
    theirs = dict(model.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        _close(p.grad, theirs[name].grad, 1e-3, f"grad {name} ({origin}, {mode})")
    buffers = dict(model.named_buffers())
    for name, b in ours.named_buffers():
        if name.endswith("running_mean") or name.endswith("running_var"):
            _close(b, buffers[name], 1e-4, name)

"""Image transforms against torch (torchvision.transforms.v2 with antialias=False resizes exactly as
torch.nn.functional.interpolate does) and numpy: values, shapes, randomness under a seed, errors."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus import ShapeError
from rumus_vision import transforms as T
from rumus_vision.transforms import functional as TF

torch = pytest.importorskip("torch")
DEVICE = rm.default_device()


def _img(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)


def _t(a: np.ndarray) -> rm.Tensor:
    return rm.tensor(a, device=DEVICE)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("size,want_hw", [((5, 9), (5, 9)), ((17, 13), (17, 13)), (6, (6, 8)), ([12], (12, 16))])
def test_resize_matches_torch(mode: str, size: object, want_hw: tuple[int, int]) -> None:
    x = _img((2, 3, 9, 12))
    got = TF.resize(_t(x), size, mode).numpy()  # type: ignore[arg-type]
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=want_hw, mode=mode,
                                           align_corners=False if mode == "bilinear" else None).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_resize_keeps_leading_dims_and_works_on_one_image() -> None:
    x = _img((3, 8, 10))
    assert T.Resize((4, 5))(_t(x)).shape == (3, 4, 5)
    assert T.Resize(4)(_t(_img((2, 2, 3, 8, 10)))).shape == (2, 2, 3, 4, 5)


def test_center_crop_is_torchvisions_window() -> None:
    x = _img((3, 10, 9))
    got = T.CenterCrop((5, 4))(_t(x)).numpy()
    top, left = int(round((10 - 5) / 2.0)), int(round((9 - 4) / 2.0))  # torchvision's rounding
    np.testing.assert_array_equal(got, x[:, top:top + 5, left:left + 4])


def test_flips_and_normalize() -> None:
    x = _img((2, 3, 4, 5))
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(_t(x)).numpy(), x[..., ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(_t(x)).numpy(), x[..., ::-1, :])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=0.0)(_t(x)).numpy(), x)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    want = (x - np.array(mean).reshape(3, 1, 1)) / np.array(std).reshape(3, 1, 1)
    np.testing.assert_allclose(T.Normalize(mean, std)(_t(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_random_crop_is_seeded_and_inside_the_padded_image() -> None:
    x = _img((3, 8, 8))
    a = T.RandomCrop(6, padding=2, generator=np.random.default_rng(5))
    b = T.RandomCrop(6, padding=2, generator=np.random.default_rng(5))
    padded = np.pad(x, ((0, 0), (2, 2), (2, 2)))
    seen = set()
    for _ in range(20):
        got, again = a(_t(x)).numpy(), b(_t(x)).numpy()
        np.testing.assert_array_equal(got, again)
        hits = [(i, j) for i in range(7) for j in range(7) if np.array_equal(padded[:, i:i + 6, j:j + 6], got)]
        assert hits, "the crop is not a window of the padded image"
        seen.add(hits[0])
    assert len(seen) > 3  # positions really vary


def test_compose_keeps_autograd() -> None:
    x = rm.tensor(_img((1, 3, 12, 12)), device=DEVICE, requires_grad=True)
    pipeline = T.Compose([T.Resize(8), T.CenterCrop(6), T.RandomHorizontalFlip(p=1.0), T.Normalize([0.5], [0.25])])
    y = pipeline(x)
    assert y.shape == (1, 3, 6, 6)
    y.sum().backward()
    assert x.grad is not None and float(np.abs(x.grad.numpy()).sum()) > 0


def test_bad_arguments_raise_clear_errors() -> None:
    x = _t(_img((3, 6, 6)))
    with pytest.raises(ShapeError, match="does not fit"):
        T.CenterCrop(8)(x)
    with pytest.raises(ShapeError, match="larger than the"):
        T.RandomCrop(7)(x)
    with pytest.raises(T.TransformError, match="interpolation 'bicubic'"):
        TF.resize(x, 4, "bicubic")
    with pytest.raises(T.TransformError, match="contains 0"):
        TF.normalize(x, [0.5], [0.0])
    with pytest.raises(ShapeError, match="1 or 3 values"):
        TF.normalize(x, [0.5, 0.5], [1.0, 1.0])
    with pytest.raises(ShapeError, match=r"\[..., C, H, W\]"):
        TF.hflip(_t(_img((6, 6))))

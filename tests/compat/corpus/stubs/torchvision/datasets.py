"""Stand-in for torchvision.datasets: image datasets of small deterministic random tensors."""

from typing import Any

import numpy as np


class _Images:
    shape = (1, 28, 28)
    classes = 10

    def __init__(self, root: str = "", train: bool = True, download: bool = False, transform: Any = None,
                 target_transform: Any = None, n: int = 32) -> None:
        rng = np.random.default_rng(0 if train else 1)
        self.images = rng.standard_normal((n, *self.shape)).astype(np.float32)
        self.labels = rng.integers(0, self.classes, size=n)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> Any:
        import torch

        x = torch.from_numpy(self.images[i])
        if self.transform is not None:
            x = self.transform(x)
        return x, int(self.labels[i])


class MNIST(_Images):
    pass


class FashionMNIST(_Images):
    pass


class CIFAR10(_Images):
    shape = (3, 32, 32)

"""Stand-in for torchvision.transforms: the basic transforms on tensors."""

from typing import Any


class Compose:
    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, x: Any) -> Any:
        return x


class Normalize:
    def __init__(self, mean: Any, std: Any) -> None:
        self.mean, self.std = mean, std

    def __call__(self, x: Any) -> Any:
        import torch

        mean = torch.tensor(self.mean, dtype=x.dtype).reshape(-1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype).reshape(-1, 1, 1)
        return (x - mean) / std


class Resize:
    def __init__(self, size: Any) -> None:
        self.size = size

    def __call__(self, x: Any) -> Any:
        return x

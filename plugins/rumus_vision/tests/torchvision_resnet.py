"""torchvision's ResNet-18, written out from torch.nn with torchvision's module names (torchvision/models/
resnet.py: BasicBlock, _make_layer, downsample = Sequential(conv1x1, BatchNorm2d)) as one nn.Sequential,
for machines where the torchvision wheel matching the installed torch cannot load. `reference_resnet18()`
returns the real torchvision model when it imports, this one otherwise."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from torch import nn


class Block(nn.Module):
    """torchvision's BasicBlock: conv1, bn1, relu, conv2, bn2 and, when the shape changes, downsample."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        parts: dict[str, nn.Module] = {
            "conv1": nn.Conv2d(cin, cout, 3, stride, 1, bias=False), "bn1": nn.BatchNorm2d(cout),
            "relu": nn.ReLU(inplace=True), "conv2": nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            "bn2": nn.BatchNorm2d(cout)}
        if stride != 1 or cin != cout:
            parts["downsample"] = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        for name, module in parts.items():
            self.add_module(name, module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.downsample(x) if hasattr(self, "downsample") else x
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + skip)


def ResNet18(num_classes: int = 1000) -> nn.Module:  # noqa: N802  (named like the model it stands for)
    """The stem, four stages of two blocks, pooling and the classifier, under torchvision's names."""
    stem = [("conv1", nn.Conv2d(3, 64, 7, 2, 3, bias=False)), ("bn1", nn.BatchNorm2d(64)),
            ("relu", nn.ReLU(inplace=True)), ("maxpool", nn.MaxPool2d(3, 2, 1))]
    stages = [(f"layer{k + 1}", nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
              for k, (cin, cout, stride) in enumerate([(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)])]
    head = [("avgpool", nn.AdaptiveAvgPool2d((1, 1))), ("flatten", nn.Flatten(1)), ("fc", nn.Linear(512, num_classes))]
    return nn.Sequential(OrderedDict(stem + stages + head))


def torchvision_resnet18(num_classes: int) -> Any | None:
    """torchvision.models.resnet18, or None when torchvision is missing or cannot load with this torch."""
    try:
        from torchvision.models import resnet18
    except Exception:  # ImportError, or torchvision's C ops failing to register against another torch build
        return None
    return resnet18(weights=None, num_classes=num_classes)


def reference_resnet18(num_classes: int = 1000) -> tuple[nn.Module, str]:
    model = torchvision_resnet18(num_classes)
    return (model, "torchvision") if model is not None else (ResNet18(num_classes), "torch.nn transcription")

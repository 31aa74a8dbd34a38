"""Vision models with torchvision's parameter names, so torchvision state dicts load unchanged."""

from .resnet import BasicBlock, ResNet, resnet18

__all__ = ["BasicBlock", "ResNet", "resnet18"]

"""The small models and data sets that several test files train: SPEC A1's XOR MLP and A3's three-class
problem."""

from __future__ import annotations

from typing import Any

import rumus as rm
from rumus import nn


class XorMLP(nn.Module):
    """2 -> 8 (ReLU) -> 1: SPEC A1's network, with the submodule names the state_dict tests expect."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(2, 8)
        self.output = nn.Linear(8, 1)

    def forward(self, x: Any) -> Any:
        return self.output(rm.relu(self.hidden(x)))


def three_class_data(device: Any = None) -> tuple[rm.Tensor, rm.Tensor]:
    """SPEC A3: 12 rows of 4 features, 3 separable classes (one-hot-ish feature c, a small ramp in feature 3)."""
    rows, targets = [], []
    for c in range(3):
        for v in range(4):
            row = [0.1] * 4
            row[c] = 1.0
            row[3] = v * 0.05
            rows.append(row)
            targets.append(c)
    return rm.tensor(rows, device=device), rm.tensor(targets, dtype=rm.int64, device=device)

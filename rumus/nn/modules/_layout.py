"""torch.nn.modules' layout over rumus.nn: `from torch.nn.modules.activation import ReLU` keeps working after
renaming the import. Each submodule lists its torch names; the ones rumus.nn has are bound (the same
objects as rumus.nn's), the others stay absent, so importing one raises ImportError naming it rather than
a stand-in that behaves differently."""

from __future__ import annotations

from typing import Any


def reexport(namespace: dict[str, Any], torch_names: list[str]) -> list[str]:
    import sys
    nn_names = vars(sys.modules["rumus.nn"])  # rumus.nn imports this package last, so its names are bound

    found = [n for n in torch_names if n in nn_names]
    for n in found:
        namespace[n] = nn_names[n]
    return found

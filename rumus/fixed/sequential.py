"""FixedSequential: a chain of FixedLinear / FixedReLU layers sharing one scale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rumus_contracts import DTypeError, RumusError, ShapeError, fixed_i16

from ..tensor import Tensor
from .layers import FixedLayer, FixedLinear, FixedReLU
from .tensor import require_fixed

if TYPE_CHECKING:
    from .convert import ConversionReport
    from .fixture import Fixture


class FixedSequential:
    """layers applied in order. The scale is the linear layers' (all equal), or `scale_log2` when the
    chain has none. `report` is filled by `from_float` (the conversion's error against the float model)."""

    def __init__(self, *layers: FixedLayer, scale_log2: int | None = None) -> None:
        scales = {layer.scale_log2 for layer in layers if isinstance(layer, FixedLinear)}
        for i, layer in enumerate(layers):
            if not isinstance(layer, (FixedLinear, FixedReLU)):
                raise RumusError(f"FixedSequential: layer {i} is a {type(layer).__name__}; only FixedLinear and "
                                 f"FixedReLU are fixed-point layers")
        if scale_log2 is not None:
            fixed_i16(scale_log2)
            scales.add(scale_log2)
        if len(scales) > 1:
            raise DTypeError(f"FixedSequential: layers have different fixed-point scales {sorted(scales)}; one "
                             f"scale_log2 is shared by the whole model")
        if not scales:
            raise DTypeError("FixedSequential: no linear layer fixes the scale; pass scale_log2=")
        features = None
        for i, layer in enumerate(layers):
            if isinstance(layer, FixedLinear):
                if features is not None and layer.in_features != features:
                    raise ShapeError(f"FixedSequential: layer {i} takes {layer.in_features} features but the "
                                     f"layer before gives {features}")
                features = layer.out_features
        self.layers: tuple[FixedLayer, ...] = tuple(layers)
        self.scale_log2: int = scales.pop()
        self.report: ConversionReport | None = None

    def __call__(self, x: Tensor) -> Tensor:
        require_fixed(x, "the input", self.scale_log2)
        for layer in self.layers:
            x = layer(x)
        return x

    forward = __call__

    def fixture(self, x: Tensor) -> Fixture:
        """Run x through the model and record layers, input and output as a canonical fixture."""
        from .fixture import FixedFixtureBuilder
        builder = FixedFixtureBuilder(self.scale_log2)
        for layer in self.layers:
            if isinstance(layer, FixedLinear):
                builder.add_linear(layer)
            else:
                builder.add_relu()
        return builder.finish(x, self(x))

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[FixedLayer]:
        return iter(self.layers)

    def __getitem__(self, i: int) -> Any:
        return self.layers[i]

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({i}): {layer!r}," for i, layer in enumerate(self.layers))
        return f"FixedSequential({inner}\n  scale_log2={self.scale_log2},\n)"

"""Fixtures: a fixed-point model, one input and the output it gave, as canonical JSON (SPEC E).

A fixture is evidence: anyone can re-run the recorded layers on the recorded input (see verify.py)
and must get the recorded output bit for bit, on any machine and any thread count.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rumus_contracts import DTypeError, RumusError, ShapeError, fixed_i16
from rumus_contracts.ops.fixed import OVERFLOW, ROUNDING

from ..tensor import Tensor
from . import canonical_json
from .layers import FixedLinear, FixedReLU
from .tensor import require_fixed, tensor

if TYPE_CHECKING:
    from .sequential import FixedSequential
    from .verify import VerifyResult

FORMAT = "rumus-fixed-fixture"
VERSION = 1
DTYPE_NAME = "FixedI16"


@dataclass(frozen=True)
class LinearRecord:
    """A linear layer as recorded: weight flat row-major [in, out], bias [out] or None."""

    kind: ClassVar[str] = "linear"
    in_features: int
    out_features: int
    weight: tuple[int, ...]
    bias: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "in_features": self.in_features, "out_features": self.out_features,
            "weight_shape": [self.in_features, self.out_features], "weight": list(self.weight),
            "bias_shape": None if self.bias is None else [self.out_features],
            "bias": None if self.bias is None else list(self.bias),
        }

    def layer(self, scale_log2: int) -> FixedLinear:
        weight = np.array(self.weight, dtype=np.int16).reshape(self.in_features, self.out_features)
        return FixedLinear(weight, None if self.bias is None else list(self.bias), scale_log2)


@dataclass(frozen=True)
class ReluRecord:
    kind: ClassVar[str] = "relu"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def layer(self, scale_log2: int) -> FixedReLU:
        return FixedReLU()


LayerRecord = LinearRecord | ReluRecord


def _flat(t: Tensor) -> tuple[int, ...]:
    return tuple(t.fixed_i16_data().reshape(-1).tolist())


def chain_problems(layers: Sequence[LayerRecord], input_shape: Sequence[int], n_input: int,
                   output_shape: Sequence[int], n_output: int) -> list[tuple[str, str]]:
    """(field, problem) for every way the shapes of a fixture do not fit together."""
    problems: list[tuple[str, str]] = []
    if len(input_shape) < 1:
        return [("input_shape", "needs at least one dim (the features)")]
    if n_input != math.prod(input_shape):
        problems.append(("input", f"holds {n_input} values but input_shape {list(input_shape)} needs "
                                  f"{math.prod(input_shape)}"))
    features = input_shape[-1]
    for i, rec in enumerate(layers):
        if isinstance(rec, LinearRecord):
            if rec.in_features != features:
                problems.append((f"layers[{i}].in_features", f"is {rec.in_features} but {features} features "
                                                             f"come in"))
            if len(rec.weight) != rec.in_features * rec.out_features:
                problems.append((f"layers[{i}].weight", f"holds {len(rec.weight)} values, weight_shape needs "
                                                        f"{rec.in_features * rec.out_features}"))
            if rec.bias is not None and len(rec.bias) != rec.out_features:
                problems.append((f"layers[{i}].bias", f"holds {len(rec.bias)} values, out_features is "
                                                      f"{rec.out_features}"))
            features = rec.out_features
    expected = [*input_shape[:-1], features]
    if list(output_shape) != expected:
        problems.append(("output_shape", f"is {list(output_shape)} but the layers give {expected}"))
    elif n_output != math.prod(output_shape):
        problems.append(("output", f"holds {n_output} values but output_shape {list(output_shape)} needs "
                                   f"{math.prod(output_shape)}"))
    return problems


@dataclass(frozen=True)
class Fixture:
    """A recorded fixed-point computation. Values are raw int16, flat row-major."""

    scale_log2: int
    layers: tuple[LayerRecord, ...]
    input_shape: tuple[int, ...]
    input: tuple[int, ...]
    output_shape: tuple[int, ...]
    output: tuple[int, ...]

    @property
    def scale(self) -> int:
        return 1 << self.scale_log2

    def to_dict(self) -> dict[str, Any]:
        """The fixture as a JSON object, keys in SPEC E's order."""
        return {
            "format": FORMAT, "version": VERSION, "dtype": DTYPE_NAME, "scale_log2": self.scale_log2,
            "scale": self.scale, "rounding": ROUNDING, "overflow": OVERFLOW,
            "layers": [rec.to_dict() for rec in self.layers],
            "input_shape": list(self.input_shape), "input": list(self.input),
            "output_shape": list(self.output_shape), "output": list(self.output),
        }

    def to_canonical_json(self) -> str:
        return canonical_json.dumps(self.to_dict())

    def to_canonical_bytes(self) -> bytes:
        return self.to_canonical_json().encode("utf-8")

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the canonical bytes atomically: a temp file in the same directory, then os.replace,
        so a reader never sees half a fixture and a crash leaves the old file intact (rumus.io.files)."""
        from ..io.files import atomic_write
        target = Path(path)
        atomic_write(target, self.to_canonical_bytes())
        return target

    @classmethod
    def from_json(cls, text: str | bytes) -> Fixture:
        """Parse and validate a fixture; a malformed one raises FormatError naming the field."""
        from .parse import fixture_from_json
        return fixture_from_json(text)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Fixture:
        return load_fixture(path)

    def model(self) -> FixedSequential:
        from .sequential import FixedSequential
        return FixedSequential(*(rec.layer(self.scale_log2) for rec in self.layers), scale_log2=self.scale_log2)

    def input_tensor(self) -> Tensor:
        return tensor(self.input, self.input_shape, self.scale_log2)

    def verify(self) -> VerifyResult:
        from .verify import verify
        return verify(self)


FixedFixture = Fixture


def load_fixture(path: str | os.PathLike[str]) -> Fixture:
    """Read and validate a fixture file (FormatError naming the field when malformed)."""
    from ..io.json_safe import read_bounded
    from .parse import FIXTURE_LIMITS, fixture_from_json
    return fixture_from_json(read_bounded(os.fspath(path), FIXTURE_LIMITS.max_bytes), os.fspath(path))


class FixedFixtureBuilder:
    """FixedFixtureBuilder(s).add_linear(layer).add_relu().finish(input, output) -> Fixture."""

    def __init__(self, scale_log2: int) -> None:
        fixed_i16(scale_log2)
        self.scale_log2 = scale_log2
        self._layers: list[LayerRecord] = []

    def add_linear(self, layer: FixedLinear) -> FixedFixtureBuilder:
        if not isinstance(layer, FixedLinear):
            raise RumusError(f"add_linear takes a FixedLinear, got {type(layer).__name__}")
        if layer.scale_log2 != self.scale_log2:
            raise DTypeError(f"add_linear: the layer's fixed-point scale_log2 is {layer.scale_log2}, the "
                             f"fixture's {self.scale_log2}")
        self._layers.append(LinearRecord(layer.in_features, layer.out_features, _flat(layer.weight),
                                         None if layer.bias is None else _flat(layer.bias)))
        return self

    def add_relu(self) -> FixedFixtureBuilder:
        self._layers.append(ReluRecord())
        return self

    def finish(self, input: Tensor, output: Tensor) -> Fixture:  # noqa: A002  (SPEC E's name)
        require_fixed(input, "the fixture input", self.scale_log2)
        require_fixed(output, "the fixture output", self.scale_log2)
        problems = chain_problems(self._layers, input.shape, input.numel(), output.shape, output.numel())
        if problems:
            raise ShapeError("the fixture does not fit together: " + "; ".join(f"{f} {p}" for f, p in problems))
        return Fixture(self.scale_log2, tuple(self._layers), input.shape, _flat(input), output.shape, _flat(output))

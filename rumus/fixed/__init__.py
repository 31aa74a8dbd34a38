"""rumus.fixed: the deterministic fixed-point i16 engine (SPEC E). CPU only, inference only.

A fixed_i16(s) tensor holds raw int16 q meaning q / 2**s. Linear layers accumulate in int64, add the
bias << s before rounding (nearest, ties away from zero) and saturate to int16; no float is produced
or consumed on the way, so results are bit-exact everywhere. Fixtures record a model, an input and
its output as canonical JSON that anyone can re-run (`rumus fixed verify FILE`).

    import rumus.fixed as fx
    layer = fx.FixedLinear([[16], [48]], None, scale_log2=4)
    layer(fx.tensor([16, 32], (1, 2), 4)).fixed_i16_data()      # [[112]]
"""

from __future__ import annotations

from rumus_contracts import fixed_i16
from rumus_contracts.ops.fixed import OVERFLOW, ROUNDING

from .cli import verify_main
from .convert import ConversionReport, from_float
from .fixture import FixedFixture, FixedFixtureBuilder, Fixture, LinearRecord, ReluRecord, load_fixture
from .functional import linear, relu, requantize
from .layers import FixedLinear, FixedReLU
from .sequential import FixedSequential
from .tensor import FLOAT_ROUNDING, dequantize, quantize, tensor
from .verify import VerifyResult, verify

SEMANTICS = {"rounding": ROUNDING, "overflow": OVERFLOW}

__all__ = [
    "FLOAT_ROUNDING", "OVERFLOW", "ROUNDING", "SEMANTICS", "ConversionReport", "FixedFixture",
    "FixedFixtureBuilder", "FixedLinear", "FixedReLU", "FixedSequential", "Fixture", "LinearRecord",
    "ReluRecord", "VerifyResult", "dequantize", "fixed_i16", "from_float", "linear", "load_fixture",
    "quantize", "relu", "requantize", "tensor", "verify", "verify_main",
]

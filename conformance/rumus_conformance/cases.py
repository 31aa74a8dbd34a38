"""Test cases from the op registry: samples are generated with a seed fixed per op, so runs repeat."""

from __future__ import annotations

import zlib

import numpy as np

from rumus_contracts import ErrorSample, OpSchema, Sample


def samples(schema: OpSchema) -> list[Sample]:
    if schema.samples is None:
        return []
    rng = np.random.default_rng(zlib.crc32(schema.name.encode()))
    return list(schema.samples(rng))


def error_samples(schema: OpSchema) -> list[ErrorSample]:
    return list(schema.error_samples()) if schema.error_samples is not None else []

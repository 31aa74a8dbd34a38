"""Test cases from the op registry: samples are generated with a seed fixed per op, so runs repeat."""

from __future__ import annotations

import zlib

import numpy as np

from rumus_contracts import ErrorSample, KernelEntry, OpSchema, Sample


def samples(schema: OpSchema) -> list[Sample]:
    if schema.samples is None:
        return []
    rng = np.random.default_rng(zlib.crc32(schema.name.encode()))
    return list(schema.samples(rng))


def kernel_samples(schema: OpSchema, entries: list[KernelEntry]) -> list[Sample]:
    """The samples that conditional kernels bring for themselves (see KernelRegistry): the op's samples
    may all be shapes such a kernel declines, and its reference still judges them."""
    out: list[Sample] = []
    for e in entries:
        if e.samples is not None:
            rng = np.random.default_rng(zlib.crc32(f"{schema.name}/{e.owner}".encode()))
            out.extend(e.samples(rng))
    return out


def accepts(entry: KernelEntry, schema: OpSchema, sample: Sample) -> bool:
    """Whether a conditional kernel takes this sample (its predicate on the sample's shapes and attrs)."""
    assert entry.applies is not None
    return bool(entry.applies([np.shape(a) for a in sample.inputs], schema.bind_attrs(dict(sample.attrs))))


def error_samples(schema: OpSchema) -> list[ErrorSample]:
    return list(schema.error_samples()) if schema.error_samples is not None else []

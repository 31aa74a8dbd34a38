"""Checks a plugin's registrations must pass at load time, so a broken op or kernel is reported with
the plugin's name when RUMUS starts, not as a bare TypeError at the op's first call."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .dtype import DType, bool_, int64
from .errors import PluginError
from .schema import OpRegistry, OpSchema

SAMPLES_CHECKED = 3  # the shape and dtype rules run on this many of the op's own samples


def validate_schema(schema: OpSchema) -> None:
    """The schema's rules run on its first samples and give well-formed answers; raises PluginError."""
    where = f"op '{schema.name}'"
    if not schema.name.isidentifier():
        raise PluginError(f"{where}: an op name must be a Python identifier (it becomes rumus.ops.<name>)")
    if not schema.dtypes:
        raise PluginError(f"{where}: dtypes is empty")
    if not callable(schema.reference) or not callable(schema.samples):
        raise PluginError(f"{where}: every op needs a float64 `reference` and a `samples` generator "
                          f"(the conformance suite tests the op with them)")
    rng = np.random.default_rng(zlib.crc32(schema.name.encode()))
    try:
        samples = list(schema.samples(rng))[:SAMPLES_CHECKED]
    except Exception as exc:
        raise PluginError(f"{where}: its samples generator raised {type(exc).__name__}: {exc}") from exc
    if not samples:
        raise PluginError(f"{where}: its samples generator gave no sample")
    for sample in samples:
        _check_rules(schema, sample.inputs, sample.attrs, sample.dtypes)


def _check_rules(schema: OpSchema, inputs: Sequence[Any], attrs: Any, dtypes: Sequence[DType | None] | None) -> None:
    where = f"op '{schema.name}'"
    if len(inputs) != len(schema.inputs):
        raise PluginError(f"{where}: a sample gives {len(inputs)} inputs, the schema declares {len(schema.inputs)}")
    try:
        bound = schema.bind_attrs(dict(attrs))
    except Exception as exc:
        raise PluginError(f"{where}: a sample's attributes are refused: {exc}") from exc
    shapes = [tuple(np.shape(a)) for a in inputs]
    in_dtypes = [_dtype_of(schema, a, dtypes[i] if dtypes else None) for i, a in enumerate(inputs)]
    try:
        out_shapes = schema.shape(shapes, bound)
    except Exception as exc:
        raise PluginError(f"{where}: its shape rule raised {type(exc).__name__}: {exc} on its own sample "
                          f"(input shapes {shapes})") from exc
    if not isinstance(out_shapes, (list, tuple)) or not all(
            isinstance(s, tuple) and all(isinstance(d, (int, np.integer)) and d >= 0 for d in s) for s in out_shapes):
        raise PluginError(f"{where}: its shape rule must return a list of shapes (tuples of ints >= 0), "
                          f"got {out_shapes!r}")
    if not schema.inplace and len(out_shapes) != schema.num_outputs:
        raise PluginError(f"{where}: its shape rule gives {len(out_shapes)} shapes for num_outputs="
                          f"{schema.num_outputs}")
    try:
        out_dtypes = schema.dtype(in_dtypes, bound)
    except Exception as exc:
        raise PluginError(f"{where}: its dtype rule raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(out_dtypes, (list, tuple)) or not all(isinstance(d, DType) for d in out_dtypes) \
            or len(out_dtypes) != len(out_shapes):
        raise PluginError(f"{where}: its dtype rule must return one DType per output, got {out_dtypes!r}")


def _dtype_of(schema: OpSchema, arr: Any, explicit: DType | None) -> DType:
    """The dtype the conformance suite gives this sample input (float64 arrays: the op's first dtype)."""
    if explicit is not None:
        return explicit
    kind = np.asarray(arr).dtype.kind
    return bool_ if kind == "b" else int64 if kind in "iu" else schema.dtypes[0]


def validate_kernels(owner: str, ops: OpRegistry, registrations: Sequence[tuple[str, str, Any]]) -> None:
    """Each (op, backend, entry) that `owner` registered names a known op. (Kernel dtypes are dispatch
    dtypes, which need not be the op's value dtypes: `where` dispatches on its bool condition.)"""
    for op, backend, _entry in registrations:
        if op not in ops:
            raise PluginError(f"kernel for unknown op '{op}' on backend '{backend}'; register the op's schema "
                              f"(rumus_register_ops) or fix the name")

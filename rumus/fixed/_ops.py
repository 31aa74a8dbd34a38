"""Calling the fixed-point ops: schema rules -> cached kernel -> output allocation -> kernel call.

This is the dispatcher's path (rumus._dispatch.Op) minus autograd and broadcasting, which fixed-point
ops never need. It exists because the generic dispatcher's output allocation refuses packed dtypes,
fixed_i16 included, although a fixed_i16 tensor's storage is one plain int16 per element. The schemas,
the kernel registry and the backend kernels are the shared ones, so a backend without these kernels
(WebGPU) raises KernelNotFound here exactly as it would through rumus.ops.
"""

from __future__ import annotations

import math
from typing import Any

from rumus_contracts import DeviceMismatch, DTypeError, OpSchema

from .. import _runtime
from .._storage import Storage
from ..tensor import Tensor, make_tensor

_schemas: dict[str, OpSchema] = {}


def _schema(name: str) -> OpSchema:
    schema = _schemas.get(name)
    if schema is None:
        schema = _schemas[name] = _runtime.plugins().ops.get(name)
    return schema


def call(name: str, *inputs: Tensor, **attrs: Any) -> Tensor:
    """Run op `name` on `inputs`; returns its single output (a new contiguous tensor)."""
    schema = _schema(name)
    bound = schema.bind_attrs(attrs)
    (shape,) = schema.shape([t.shape for t in inputs], bound)
    (dtype,) = schema.dtype([t.dtype for t in inputs], bound)
    key = inputs[schema.dispatch_on].dtype
    if key not in schema.dtypes:
        raise DTypeError(f"{name}: dtype {key} is not supported; the op takes "
                         f"{', '.join(str(d) for d in schema.dtypes)}")
    device = inputs[0]._storage.device
    for t in inputs[1:]:
        if t._storage.device != device:
            raise DeviceMismatch(f"{name}: inputs are on different devices: "
                                 f"{', '.join(str(x._storage.device) for x in inputs)}")
    backend = inputs[0]._storage.backend
    kernel = _runtime.kernel(name, backend, key)  # KernelNotFound names the backends that have it
    numel = math.prod(shape)
    out = make_tensor(Storage(backend.allocate(device, numel, dtype), device, dtype, backend, numel), shape)
    kernel([out._arg], [t._arg for t in inputs], bound)
    return out

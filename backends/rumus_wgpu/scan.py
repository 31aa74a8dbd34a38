"""cumsum / cumprod along one dim (shaders/scan.wgsl): one invocation walks each row in order, accumulating
in f32 (PyTorch's CUDA accumulate type), so prefixes are the sequential ones; the schema hands the input
over contiguous."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import TensorArg

from .layout import dealias, device_of
from .nn_common import dispatch


def _scan(op: str) -> Any:
    def kernel(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        y, x = outputs[0], inputs[0]
        if y.numel == 0:
            return
        dev = device_of(outputs, inputs)
        (x,), _ = dealias(dev, outputs, [x])
        dim = int(attrs["dim"]) if y.shape else 0
        length = y.shape[dim] if y.shape else 1
        inner = 1
        for size in y.shape[dim + 1:]:
            inner *= size
        dispatch(dev, "scan", op, y.dtype, [y.buffer, x.buffer], [length, inner, x.offset, y.offset],
                 y.numel // length, include=("grid",))
    return kernel


def kernels() -> dict[str, Any]:
    return {"cumsum": _scan("cumsum"), "cumprod": _scan("cumprod")}

"""Batch normalization, forward and backward: fused C loops (statistics in double; float16/bfloat16 widened on
load and rounded once on store). The layer, RMS and group norms, both ways, are row ops of the row-op table
(kernels_row_ops.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import DType, Kernel, TensorArg

from ._lib import lib
from .dtypes import FLOAT, HALF
from .kernels_nn_conv import ptr

_SFX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def _fns(name: str) -> dict[str, Any]:
    return {dt: getattr(lib, f"rumus_{name}_{sfx}") for dt, sfx in _SFX.items()}


_BN_STATS, _BN, _BN_BACK = _fns("batch_norm_stats"), _fns("batch_norm"), _fns("batch_norm_backward")


def _ncs(x: TensorArg) -> tuple[int, int, int]:
    """x [N, C, *] as (N, C, prod(*))."""
    s = 1
    for d in x.shape[2:]:
        s *= d
    return x.shape[0], x.shape[1], s


def batch_norm_stats(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (mean, var), x = outputs, inputs[0]
    _BN_STATS[x.dtype.name](ptr(x), ptr(mean), ptr(var), *_ncs(x))


def batch_norm(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    y, (x, w, b, mean, var) = outputs[0], inputs
    _BN[x.dtype.name](ptr(x), ptr(w), ptr(b), ptr(mean), ptr(var), ptr(y), *_ncs(x), float(attrs["eps"]),
                      int(bool(attrs["training"])))


def batch_norm_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (gx, gw, gb), (g, x, w, mean, var) = outputs, inputs
    _BN_BACK[x.dtype.name](ptr(g), ptr(x), ptr(w), ptr(mean), ptr(var), ptr(gx), ptr(gw), ptr(gb), *_ncs(x),
                           float(attrs["eps"]), int(bool(attrs["training"])))


_DTYPES = (*FLOAT, *HALF)
# every kernel is named after its op
KERNELS: list[tuple[str, Kernel, tuple[DType, ...]]] = [
    (k.__name__, k, _DTYPES) for k in (batch_norm_stats, batch_norm, batch_norm_backward)]

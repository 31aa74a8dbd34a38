"""Hook implementations: RUMUS calls these when it loads the plugin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from rumus_contracts import KernelRegistry, OpRegistry, ShaderKernel, TensorArg, float32, float64, hookimpl

from .cpu_kernel import swish_cpu
from .schema import SWISH


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    registry.register(SWISH)


def _workgroups(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> tuple[int, int, int]:
    groups = max(1, -(-outs[0].numel // 256))
    return (min(groups, 65535), -(-groups // 65535), 1)


def _params(outs: Sequence[TensorArg], ins: Sequence[TensorArg], attrs: Mapping[str, Any]) -> list[int | float]:
    return [outs[0].numel, outs[0].offset, ins[0].offset, float(attrs["beta"])]


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    registry.register("hello_swish", "cpu", swish_cpu, dtypes=[float32, float64])
    source = files("rumus_hello").joinpath("swish.wgsl").read_text()
    registry.register("hello_swish", "wgpu", ShaderKernel("wgsl", source, "main", _workgroups, _params),
                      dtypes=[float32])

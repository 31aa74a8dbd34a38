"""RUMUS plugin entry point of the WebGPU backend. Importing this module neither imports wgpu nor
touches hardware: the backend starts (and finds adapters) on first use."""

from __future__ import annotations

from typing import Any

from rumus_contracts import BackendRegistry, KernelRegistry, hookimpl


def _factory() -> Any:
    from .backend import WgpuBackend
    return WgpuBackend()


@hookimpl
def rumus_register_backends(registry: BackendRegistry) -> None:
    registry.register("wgpu", _factory)


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    from rumus_contracts import bfloat16

    from .kernels import CLAIMS, bfloat16_widened, kernel_table
    table = kernel_table()
    for op, dtypes in CLAIMS.items():
        registry.register(op, "wgpu", table[op], dtypes=dtypes)
    for op, kernel in bfloat16_widened(table).items():  # bfloat16 through float32 kernels (widen.py)
        registry.register(op, "wgpu", kernel, dtypes=(bfloat16,))
    from . import quant  # q8 / int4 weights
    for op, dtypes in quant.CLAIMS.items():
        registry.register(op, "wgpu", quant.kernels()[op], dtypes=dtypes)

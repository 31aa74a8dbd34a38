"""Bind-group creation without wgpu-py's descriptor building.

wgpu-py's `GPUDevice.create_bind_group` checks each entry dict, builds every C struct through its
generic `new_struct` (field checks, keep-alive weak references) and wraps the result: about 30 Python
calls per entry. A bind-group cache miss happens on most dispatches of a small training step (its
buffers come back from the pool in a different order each batch), so this was the largest host cost
that grew since session 3 (benchmarks/host_calls.py). Here the entry array and descriptor are filled
directly and wgpu-py's error-checked call (`libf`) creates the group, so validation errors still raise
as they do through the public API; the result is wgpu-py's own GPUBindGroup, released the same way.
None when the private names are missing or RUMUS_WGPU_PUBLIC_API=1 (the caller then uses the public API).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# (binding index, GPUBuffer, byte size) of each buffer binding, at offset 0
Entry = tuple[int, Any, int]
MakeBindGroup = Callable[[Any, Any, Sequence[Entry]], Any]


def native_bind_group_maker() -> MakeBindGroup | None:
    """A function (device, layout, entries) -> GPUBindGroup on wgpu-py's native layer, or None."""
    from .pipelines import private_api_allowed
    if not private_api_allowed():
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        ffi, create, group_cls = _api.ffi, _api.libf.wgpuDeviceCreateBindGroup, _api.GPUBindGroup
        ffi.typeof("WGPUBindGroupEntry[]")
        ffi.typeof("WGPUBindGroupDescriptor *")
    except Exception:
        return None

    def make(device: Any, layout: Any, entries: Sequence[Entry]) -> Any:
        arr = ffi.new("WGPUBindGroupEntry[]", len(entries))  # zeroed: no chain, sampler, texture view
        for i, (binding, gpu, size) in enumerate(entries):
            e = arr[i]
            e.binding = binding
            e.buffer = gpu._internal
            e.size = size
        desc = ffi.new("WGPUBindGroupDescriptor *")  # zeroed label: the empty string view
        desc.layout = layout._internal
        desc.entries = arr
        desc.entryCount = len(entries)
        return group_cls("", create(device._internal, desc), device)

    return make

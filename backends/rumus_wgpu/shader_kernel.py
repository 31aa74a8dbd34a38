"""Plugin kernels given as WGSL (`rumus_contracts.ShaderKernel`): compiled and dispatched like ours.

Bindings follow the ShaderKernel contract: group 0, outputs first, then inputs, then one uniform
buffer holding `params(outputs, inputs, attrs)` packed as 32-bit words (Python ints as u32/i32, floats
as f32). The bind-group layout is read from the shader's own declarations, so read-only inputs may
be declared `var<storage, read>` and in-place inputs `var<storage, read_write>`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import Kernel, RumusError, ShaderKernel, TensorArg

from .layout import dealias, device_of


def pack_params(values: Sequence[int | float]) -> bytes:
    out = bytearray()
    for v in values:
        if isinstance(v, bool) or isinstance(v, int):
            out += struct.pack("<I", int(v) & 0xFFFFFFFF)
        elif isinstance(v, float):
            out += struct.pack("<f", v)
        else:
            raise RumusError(f"ShaderKernel params must be ints or floats, got {type(v).__name__}")
    return bytes(out)


def adapt(kernel: ShaderKernel) -> Kernel:
    if kernel.language.lower() != "wgsl":
        raise RumusError(f"the wgpu backend runs WGSL kernels, not {kernel.language!r}")
    digest = hashlib.sha1(kernel.source.encode()).hexdigest()[:16]

    def run(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
        dev = device_of(outputs, inputs)
        inputs, _ = dealias(dev, outputs, inputs)
        data = pack_params(kernel.params(outputs, inputs, attrs)) if kernel.params is not None else None
        prog = dev.programs.get(("shader", digest, kernel.entry_point), lambda: kernel.source,
                                entry_point=kernel.entry_point, uniform_size=len(data or b""))
        if data is not None and not prog.uniform_size:
            raise RumusError(f"ShaderKernel '{kernel.entry_point}' has params but declares no uniform buffer")
        if data is not None and len(data) > prog.uniform_size:
            raise RumusError(f"ShaderKernel '{kernel.entry_point}': {len(data)} bytes of params exceed the "
                             f"{prog.uniform_size} bytes of its first call")
        x, y, z = (int(v) for v in kernel.workgroups(outputs, inputs, attrs))
        if x * y * z == 0:
            return
        buffers = [t.buffer for t in (*outputs, *inputs)]
        dev.recorder.dispatch(prog, buffers, data, (x, y, z))
    run.__name__ = f"wgsl_{kernel.entry_point}"
    return run

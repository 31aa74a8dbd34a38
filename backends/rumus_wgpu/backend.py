"""WgpuBackend: the `Backend` port over wgpu devices (imported only when the backend is first used).

Storage: one GPU buffer per tensor storage, holding the dtype's numpy storage layout, except bool,
which is widened to one u32 (0/1) per element so kernels can address it; `to_numpy` narrows it back
to numpy bool. int64 keeps its 8-byte layout (kernels treat it as two u32 words), so it reads back
unchanged. bfloat16 keeps its 2-byte layout (two elements per u32 word, the buffer rounded up to 4
bytes), so upload and read-back are byte-exact. Any other dtype can be stored and read back raw; only
the dtypes in `capabilities()` have kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rumus_contracts import (
    Capabilities, Device, DType, Kernel, RumusError, ShaderKernel, TensorArg, bfloat16, bool_, float16, float32,
    int32, int64,
)

from . import device as _device
from .layout import new_buffer
from .pool import WgpuBuffer

BASE_DTYPES = (float32, bfloat16, int32, int64, bool_)  # bfloat16: 16-bit words (bf16.py)


class WgpuBackend:
    name = "wgpu"

    def __init__(self) -> None:
        self._adapters = _device.list_adapters()
        self._devices: dict[int, _device.WgpuDevice] = {}
        from .kernels import kernel_table
        self.kernels: Mapping[str, Kernel] = kernel_table()

    # -- devices ---------------------------------------------------------------------------------
    def devices(self) -> list[Device]:
        return [Device("wgpu", i) for i in range(len(self._adapters))]

    def device(self, device: Device | int = 0) -> _device.WgpuDevice:
        index = device if isinstance(device, int) else device.index
        dev = self._devices.get(index)
        if dev is None:
            if not 0 <= index < len(self._adapters):
                raise RumusError(f"there is no device wgpu:{index}; this machine has "
                                 f"{', '.join(str(d) for d in self.devices())}")
            dev = self._devices[index] = _device.WgpuDevice(self._adapters[index], index)
        return dev

    def capabilities(self, device: Device) -> Capabilities:
        dev = self.device(device)
        dtypes = BASE_DTYPES + ((float16,) if dev.has_f16 else ())
        return Capabilities(dtypes=dtypes, features=dev.features, limits=dict(dev.limits),
                            description=dev.description)

    # -- memory ----------------------------------------------------------------------------------
    def allocate(self, device: Device, numel: int, dtype: DType) -> WgpuBuffer:
        dev = self._devices.get(device.index) if type(device) is Device else None
        if dev is None:
            dev = self.device(device)
        nbytes = numel * (4 if dtype.is_bool else dtype.itemsize)
        # the label only appears in the too-large error: format it only then
        label = f"{dtype} tensor of {numel} elements" if nbytes > dev.pool.max_binding else ""
        return new_buffer(dev, nbytes, label)

    def from_numpy(self, device: Device, array: np.ndarray[Any, Any], dtype: DType) -> WgpuBuffer:
        data = np.ascontiguousarray(array, dtype=dtype.numpy)
        if dtype.is_bool:
            data = data.astype(np.uint32)
        buf = self.allocate(device, data.size, dtype)
        raw = data.reshape(-1).view(np.uint8)
        if raw.size % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.size % 4, np.uint8)])
        if raw.size:
            buf.dev.device.queue.write_buffer(buf.gpu, 0, raw)
        return buf

    def to_numpy(self, arg: TensorArg) -> np.ndarray[Any, Any]:
        dtype = arg.dtype
        store_dt = np.dtype(np.uint32) if dtype.is_bool else dtype.numpy
        shape = tuple(arg.shape)
        numel = arg.numel
        if numel == 0:
            return np.empty(shape, dtype.numpy)
        lo = arg.offset + sum((n - 1) * s for n, s in zip(shape, arg.strides) if s < 0)
        hi = arg.offset + sum((n - 1) * s for n, s in zip(shape, arg.strides) if s > 0) + 1
        item = store_dt.itemsize
        start, stop = lo * item, hi * item
        a_start, a_stop = start & ~3, (stop + 3) & ~3
        buf: WgpuBuffer = arg.buffer
        if a_stop > buf.size:
            raise RumusError(f"view {arg} reaches past its {buf.nbytes}-byte buffer")
        raw = np.frombuffer(buf.dev.recorder.read(buf, a_start, a_stop - a_start), np.uint8)
        flat = raw[start - a_start: stop - a_start].view(store_dt)
        strides = tuple(s * item for s in arg.strides)
        view = np.lib.stride_tricks.as_strided(flat[arg.offset - lo:], shape, strides) if shape else \
            flat[arg.offset - lo: arg.offset - lo + 1].reshape(())
        out = np.array(view, copy=True)
        return out.astype(bool) if dtype.is_bool else out

    def copy_(self, dst: TensorArg, src: TensorArg) -> None:
        self.kernels["copy"]([dst], [src], {"dtype": dst.dtype})

    def synchronize(self, device: Device) -> None:
        self.device(device).recorder.synchronize()

    def flush(self, device: Device) -> None:
        """Submit recorded work without waiting for it."""
        self.device(device).recorder.flush()

    # -- statistics ------------------------------------------------------------------------------
    def stats(self, device: Device | int = 0) -> dict[str, int]:
        """Counters of one device: submits, syncs (host waits), dispatches, copies, pending, programs."""
        dev = self.device(device)
        return {**dev.recorder.stats(), "programs": len(dev.programs)}

    def reset_stats(self, device: Device | int = 0) -> None:
        dev = self.device(device)
        rec, pool = dev.recorder, dev.pool
        rec.submits = rec.syncs = rec.dispatches = rec.copies = 0
        pool.hits = pool.misses = pool.releases = 0

    def pool_stats(self, device: Device | int = 0) -> dict[str, int]:
        """Buffer pool counters: hits (served from the pool), misses (new buffers), releases, bytes."""
        return self.device(device).pool.stats()

    def empty_cache(self, device: Device | int = 0) -> None:
        dev = self.device(device)
        dev.recorder.synchronize()
        dev.programs.clear_bind_groups()
        dev.pool.empty()

    # -- plugin kernels --------------------------------------------------------------------------
    def adapt_kernel(self, kernel: Any) -> Kernel:
        """A callable kernel for a `ShaderKernel` (WGSL) registered for backend 'wgpu'; others unchanged."""
        if not isinstance(kernel, ShaderKernel):
            return kernel  # type: ignore[no-any-return]
        from .shader_kernel import adapt
        return adapt(kernel)

    def compile_fused(self, program: Any) -> Kernel:
        """rm.compile's optional fusion port (rumus_contracts.backend.FusedProgram): one WGSL shader."""
        from .fused import compile_fused
        return compile_fused(program)

    def compile_fused_row(self, program: Any) -> Kernel:
        """rm.compile's optional port for a chain fused into a row op (rumus_contracts.backend.FusedRowProgram)."""
        from .fused_rows import compile_fused_row
        return compile_fused_row(program)

    def record_launches(self, device: Device) -> Any:
        """rm.compile's optional launch tape (recorder.LaunchTape): a kernel call's dispatches, replayable."""
        from .recorder import LaunchTape
        return LaunchTape(self.device(device).recorder)


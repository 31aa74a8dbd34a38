"""Size-bucketed GPU buffer pool, and the tensor buffer handle whose collection feeds it.

A `WgpuBuffer` is what the core holds as `Storage.buffer`. When its last user is garbage-collected,
`__del__` hands the GPU buffer back to the pool. A buffer used by a recorded but not yet submitted
command cannot come back early: the recorder keeps the handle alive until the batch is submitted,
and anything recorded afterwards runs after that batch in queue order.

The pool holds every buffer it hands out (`_lent`) until the handle gives it back. Without that, a
tensor dying inside a reference cycle took its GPUBuffer with it into the garbage collector's set, whose
finalizers run in no set order: wgpu-py's own could release the native buffer first, and the handle then
returned a dead buffer to the pool, so the next tensor of that size failed with "initializer for ctype
'struct WGPUBufferImpl *' must be a cdata pointer" (an imported ONNX LSTM reloaded in a loop did, on its
third run). Held by the pool, a lent buffer is never garbage while its handle lives.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from rumus_contracts import DType, OutOfMemory, config

from .native import released

STORAGE, COPY_SRC, COPY_DST, MAP_READ = 0x80, 0x4, 0x8, 0x1  # wgpu.BufferUsage bits (no wgpu import here)
MIN_BUCKET = 256
CACHE_MB = "RUMUS_WGPU_POOL_CACHE_MB"  # MiB of freed buffers kept for reuse


def bucket_size(nbytes: int) -> int:
    """Round up to 256 bytes, then to one of four steps per power of two (at most 25% waste)."""
    n = max(MIN_BUCKET, (nbytes + 255) & ~255)
    top = 1 << (n - 1).bit_length()
    step = max(top // 8, MIN_BUCKET)  # top/2 .. top in steps of top/8
    return min(top, (n + step - 1) // step * step)


def storage_itemsize(dtype: DType) -> int:
    """Bytes per storage element on the GPU: bool is widened to one u32 per element."""
    return 4 if dtype.is_bool else dtype.itemsize


class WgpuBuffer:
    """A tensor's GPU memory: `gpu` (a wgpu GPUBuffer), `nbytes` used, and its owning device."""

    __slots__ = ("gpu", "nbytes", "bind_size", "size", "dev", "bind_key", "__weakref__")

    def __init__(self, gpu: Any, nbytes: int, size: int, dev: Any) -> None:
        self.gpu = gpu
        self.nbytes = nbytes
        self.size = size
        # storage bindings cover whole 16-byte words so the GEMM may view a buffer as array<vec4<f32>>
        self.bind_size = min(size, max(16, (nbytes + 15) & ~15))
        self.dev = dev
        self.bind_key = (id(gpu), self.bind_size)  # what a cached bind group is keyed by

    def __del__(self) -> None:
        try:
            self.dev.pool.release(self.gpu, self.size)
        except Exception:  # interpreter shutdown: the device may already be gone
            pass

    def __repr__(self) -> str:
        return f"WgpuBuffer({self.nbytes} bytes on {self.dev.name})"


class BufferPool:
    """Free GPU buffers by bucket size; `stats()` counts hits (reused) and misses (new buffers)."""

    def __init__(self, device: Any, max_binding: int, max_buffer: int,
                 usage: int = STORAGE | COPY_SRC | COPY_DST) -> None:
        self._device = device
        self._usage = usage
        self._free: dict[int, deque[Any]] = {}  # per bucket size, oldest release on the left
        self._age: OrderedDict[int, int] = OrderedDict()  # id(buffer) -> size of every cached buffer, oldest first
        self._lent: dict[int, Any] = {}  # id(buffer) -> buffer, for every buffer a handle holds (see the top)
        self.max_binding, self.max_buffer = max_binding, max_buffer
        # cached (free) bytes kept for reuse; beyond this, released buffers are destroyed
        self.max_cached = int(float(config.text(CACHE_MB)) * (1 << 20))
        self.hits = self.misses = self.releases = 0
        self.cached_bytes = self.allocated_bytes = 0

    def acquire(self, nbytes: int, label: str = "") -> tuple[Any, int]:
        """A GPU buffer of at least `nbytes` bytes and its real size."""
        if nbytes > self.max_binding:
            raise OutOfMemory(f"a {label or 'tensor'} of {nbytes} bytes is larger than this device's maximum "
                              f"storage binding size of {self.max_binding} bytes (max-storage-buffer-binding-size); "
                              f"split it into smaller tensors")
        size = bucket_size(nbytes)
        if size > self.max_buffer:
            size = (nbytes + 15) & ~15
        free = self._free.get(size)
        if free:
            self.hits += 1
            self.cached_bytes -= size
            buf = free.pop()  # the most recently released: warmest in the driver's caches
            del self._age[id(buf)]
            self._lent[id(buf)] = buf
            return buf, size
        self.misses += 1
        try:
            buf = self._device.create_buffer(size=size, usage=self._usage)
        except Exception:
            self.empty()  # out of memory: give cached buffers back to the driver and try once more
            buf = self._device.create_buffer(size=size, usage=self._usage)
        self.allocated_bytes += size
        self._lent[id(buf)] = buf
        return buf, size

    def release(self, buf: Any, size: int) -> None:
        """Cache a released buffer; past the cap, destroy the buffers released longest ago first (of any
        size), so a training loop's working set displaces what an earlier phase left (a benchmark's other
        shapes, an evaluation pass) instead of being destroyed and re-created every step."""
        self.releases += 1
        if self._lent.pop(id(buf), None) is None or released(buf):
            # not lent by this pool (or given back twice), or released by wgpu-py already: never cached
            return
        if size > self.max_cached:
            buf.destroy()
            self.allocated_bytes -= size
            return
        while self.cached_bytes + size > self.max_cached:
            old_id, old_size = self._age.popitem(last=False)
            old = self._free[old_size].popleft()  # the oldest of its size is the oldest overall's twin
            assert id(old) == old_id
            old.destroy()
            self.cached_bytes -= old_size
            self.allocated_bytes -= old_size
        self.cached_bytes += size
        self._age[id(buf)] = size
        free = self._free.get(size)
        if free is None:
            self._free[size] = deque([buf])
        else:
            free.append(buf)

    def empty(self) -> None:
        """Destroy every cached buffer (like torch.cuda.empty_cache)."""
        for size, bufs in self._free.items():
            for b in bufs:
                b.destroy()
                self.allocated_bytes -= size
        self._free.clear()
        self._age.clear()
        self.cached_bytes = 0

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "releases": self.releases,
                "cached_bytes": self.cached_bytes, "cached_buffers": sum(len(v) for v in self._free.values()),
                "allocated_bytes": self.allocated_bytes, "lent_buffers": len(self._lent)}

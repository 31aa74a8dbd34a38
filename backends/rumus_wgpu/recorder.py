"""Command recording: dispatches go into one command encoder and are submitted in batches.

The host waits only in `read` (to_numpy), `synchronize`, never per kernel. A batch is submitted
(without waiting) when it reaches its dispatch bound or its uniform memory is full. After a wait the GPU
is idle, so the bound ramps up from `first_batch` (64) to `max_dispatches` (256), doubling per batch: a
long step's first kernels start on the GPU after 64 recorded dispatches instead of 256 (about 4 ms of
host recording on the H200's LM step instead of 17), while a small step stays one submit. Uniform data of a
batch lives in one host bytearray, uploaded with a single `queue.write_buffer` right before the
submit, and each dispatch binds its slice through a dynamic offset: no buffer allocation per call.
Reusing the same uniform buffer for the next batch is safe because queue writes are ordered after
earlier submissions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .native import NativePathError

UNIFORM_ALIGN = 256  # >= every adapter's min-uniform-buffer-offset-alignment


class Recorder:
    def __init__(self, dev: Any, max_dispatches: int = 256, uniform_capacity: int = 256 * 1024,
                 first_batch: int = 64) -> None:
        import wgpu

        self._wgpu = wgpu
        self.dev = dev
        self.device = dev.device
        self.queue = dev.device.queue
        self.max_dispatches = max_dispatches
        self.first_batch = min(first_batch, max_dispatches)
        self.bound = self.first_batch  # this batch's dispatch bound (ramps up, see the module doc)
        self.capacity = uniform_capacity
        self.uniform_gpu = self.device.create_buffer(
            size=uniform_capacity, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self.host = bytearray(uniform_capacity)
        self.used = 0
        self.count = 0
        self.encoder: Any = None
        self.cpass: Any = None
        self.keep: list[Any] = []  # buffer handles used by the pending batch (kept alive until submitted)
        self._staging: dict[int, list[Any]] = {}
        self._fence: Any = None
        self._native = dev.native  # wgpu-py's private layer (native.py): which fast paths the probe turned on
        self._raw = dev.native.pass_calls  # None: the pass methods of wgpu-py's public API
        self._pass_handle: Any = None  # the open pass's native handle
        self._pass_pipeline: Any = None  # the pipeline last set in the open pass
        self.submits = self.syncs = self.dispatches = self.copies = 0
        # (buffer, raise_for(bits)): a u32 that kernels set on bad input, copied out with the next read
        self.error_flag: Any = None
        self.error_pending = False
        self.tape: LaunchTape | None = None  # rm.compile noting this recorder's launches (LaunchTape)

    # -- recording -------------------------------------------------------------------------------
    def _compute_pass(self) -> Any:
        if self.cpass is None:
            if self.encoder is None:
                self.encoder = self.device.create_command_encoder()
            self.cpass = self.encoder.begin_compute_pass()
            self._pass_handle = self._native.handle(self.cpass) if self._raw is not None else None
            self._pass_pipeline = None
        return self.cpass

    def _plain_encoder(self) -> Any:
        if self.cpass is not None:
            self.cpass.end()
            self.cpass = self._pass_handle = self._pass_pipeline = None
        if self.encoder is None:
            self.encoder = self.device.create_command_encoder()
        return self.encoder

    def dispatch(self, program: Any, buffers: list[Any], uniform: bytes | None,
                 groups: tuple[int, int, int], bind_group: Any = None) -> None:
        """Record one dispatch: `buffers` (WgpuBuffer handles) in binding order, then the uniform bytes.
        `bind_group`: the group for exactly these buffers, when the caller holds it (a LaunchTape replay)."""
        if self.tape is not None:
            self.tape.note_dispatch(program, buffers, uniform, groups)
        if self.count >= self.bound:
            self._flush_full()
        size = program.uniform_size
        off = 0
        if size:
            n = len(uniform) if uniform else 0
            need = ((n if n > size else size) + UNIFORM_ALIGN - 1) & ~(UNIFORM_ALIGN - 1)
            off = self.used
            if off + need > self.capacity:
                self.flush()
                off = 0
            if n:
                self.host[off:off + n] = uniform  # type: ignore[assignment]  # n > 0: uniform holds bytes
            self.used = off + need
        if bind_group is None:
            bind_group = program.bind_group(buffers, self.uniform_gpu)
        cpass = self.cpass
        if cpass is None:
            cpass = self._compute_pass()
        raw = self._raw
        if raw is not None:
            try:
                set_pipeline, set_bind_group, dispatch, offsets, null = raw
                handle, pipeline = self._pass_handle, program.pipeline_handle
                if pipeline is not self._pass_pipeline:  # consecutive dispatches of one kernel set it once
                    set_pipeline(handle, pipeline)
                    self._pass_pipeline = pipeline
                if size:
                    offsets[0] = off
                    set_bind_group(handle, 0, bind_group._internal, 1, offsets)
                else:
                    set_bind_group(handle, 0, bind_group._internal, 0, null)
                dispatch(handle, *groups)
            except Exception as exc:
                raise NativePathError("raw-passes", f"recording kernel '{program.label}'", exc) from exc
        else:
            cpass.set_pipeline(program.pipeline)
            cpass.set_bind_group(0, bind_group, [off] if size else [])
            cpass.dispatch_workgroups(*groups)
        keep = self.keep
        keep.extend(buffers)
        keep.append(bind_group)  # alive until submitted, even if the cache evicts it
        self.count += 1
        self.dispatches += 1

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        """Buffer-to-buffer copy between handles (byte offsets and size multiples of 4)."""
        if self.tape is not None:
            self.tape.note_copy(src, src_offset, dst, dst_offset, nbytes)
        if self.count >= self.bound:
            self._flush_full()
        self._plain_encoder().copy_buffer_to_buffer(src.gpu, src_offset, dst.gpu, dst_offset, nbytes)
        self.keep.extend((src, dst))
        self.count += 1
        self.copies += 1

    def _flush_full(self) -> None:
        self.flush()
        self.bound = min(2 * self.bound, self.max_dispatches)

    def flush(self) -> None:
        """Submit the pending batch without waiting for it."""
        if self.encoder is None:
            return
        encoder, self.encoder = self.encoder, None
        try:
            if self.cpass is not None:
                self.cpass.end()
            if self.used:
                self.queue.write_buffer(self.uniform_gpu, 0, memoryview(self.host)[:self.used])
            self.queue.submit([encoder.finish()])
            self.submits += 1
        finally:
            self.cpass = self._pass_handle = self._pass_pipeline = None
            self.used = self.count = 0
            self.keep = []  # handles whose tensors died during recording go back to the pool now

    # -- host synchronisation ----------------------------------------------------------------------
    def read(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        """Bytes [offset, offset + nbytes) of a handle (both multiples of 4), after all recorded work."""
        if self.tape is not None:  # a kernel that reads values cannot be replayed from its launches
            self.tape.broken = True
        wgpu = self._wgpu
        flag = self.error_flag[0] if self.error_pending else None
        total = nbytes + (4 if flag is not None else 0)
        size = max(256, 1 << (total - 1).bit_length())
        free = self._staging.setdefault(size, [])
        staging = free.pop() if free else self.device.create_buffer(
            size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        encoder = self._plain_encoder()
        encoder.copy_buffer_to_buffer(buf.gpu, offset, staging, 0, nbytes)
        if flag is not None:  # the error flag rides along in the same map: no extra sync
            encoder.copy_buffer_to_buffer(flag.gpu, 0, staging, nbytes, 4)
        self.keep.append(buf)
        self.flush()
        self.syncs += 1
        self.bound = self.first_batch  # the GPU will be idle once this wait returns
        staging.map_sync(wgpu.MapMode.READ, 0, total)
        try:
            data = staging.read_mapped(0, total)
        finally:
            staging.unmap()
        if len(free) < 4:
            free.append(staging)
        else:
            staging.destroy()
        if flag is not None:
            self.error_pending = False
            bits = int.from_bytes(bytes(data[nbytes:total]), "little")
            if bits:
                self.queue.write_buffer(flag.gpu, 0, bytes(4))
                self.error_flag[1](bits)
            data = data[:nbytes]
        return memoryview(data)

    def synchronize(self) -> None:
        """Wait for everything submitted: read back 4 bytes copied after it (mapping resolves only
        once the submission that wrote them, and so every earlier one, has finished)."""
        if self._fence is None:
            from .layout import new_buffer
            self._fence = new_buffer(self.dev, 4)
        self.read(self._fence, 0, 4)

    def stats(self) -> dict[str, int]:
        return {"submits": self.submits, "syncs": self.syncs, "dispatches": self.dispatches,
                "copies": self.copies, "pending": self.count}


class LaunchTape:
    """The dispatches and copies one kernel call recorded, to be issued again without running the kernel's
    Python (rm.compile's replay: rumus/compile/tape.py). Used as `with tape: kernel(...)`, then `freeze`
    names the buffers that change between replays (slots); every other buffer the kernel used — scratch
    it allocated included — is held by the tape, so it stays the kernel's own on every replay. A kernel
    that read values on the host while noted (`broken`) cannot be replayed this way."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.ops: list[tuple[Any, ...]] = []
        self.broken = False

    def __enter__(self) -> LaunchTape:
        if self.recorder.tape is not None:
            self.broken = True  # nested: the outer tape notes these launches
        else:
            self.recorder.tape = self
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.recorder.tape is self:
            self.recorder.tape = None
        if exc[0] is not None:
            self.broken = True

    def note_dispatch(self, program: Any, buffers: list[Any], uniform: bytes | None,
                      groups: tuple[int, int, int]) -> None:
        self.ops.append((program, list(buffers), None if uniform is None else bytes(uniform), tuple(groups)))

    def note_copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        self.ops.append((None, [src, dst], None, (src_offset, dst_offset, nbytes)))

    def freeze(self, slot_of: dict[int, int]) -> Callable[[list[Any]], None] | None:
        """A function issuing the launches again, given that replay's slot buffers (a list indexed by
        slot): handles whose id is in `slot_of` are taken from it, the others are the ones noted; the
        bind group is kept where nothing is patched. None when the tape cannot be replayed."""
        if self.broken:
            return None
        rec = self.recorder
        flag = rec.error_flag[0] if rec.error_flag is not None else None
        out: list[tuple[Any, ...]] = []
        for program, buffers, uniform, groups in self.ops:
            patches = [(i, slot_of[id(b)]) for i, b in enumerate(buffers) if id(b) in slot_of]
            fixed = [None if id(b) in slot_of else b for b in buffers]
            group = None
            if program is not None and not patches:
                group = program.bind_group(buffers, rec.uniform_gpu)
            sets_flag = flag is not None and any(b is flag for b in buffers)
            out.append((program, fixed, patches, uniform, groups, group, sets_flag))
        return functools.partial(_replay_launches, rec, out)


def _replay_launches(rec: Recorder, ops: list[tuple[Any, ...]], bufs: list[Any]) -> None:
    """Issue frozen launches (LaunchTape.freeze) again with this replay's slot buffers `bufs`."""
    for program, fixed, patches, uniform, groups, group, sets_flag in ops:
        buffers = fixed
        if patches:
            buffers = list(fixed)
            for i, slot in patches:
                buffers[i] = bufs[slot]
        if sets_flag:
            rec.error_pending = True
        if program is None:
            rec.copy(buffers[0], groups[0], buffers[1], groups[1], groups[2])
        else:
            rec.dispatch(program, buffers, uniform, groups, group)

"""wgpu-py's private native layer (`wgpu.backends.wgpu_native._api`), in one place.

Three fast paths go around wgpu-py's public API, each for a host cost measured on small steps:

* trusted-modules: shader modules without naga's runtime checks (index clamping, loop bounding), for our
  own kernels whose every global access is guarded (the GEMM): the clamping costs time in compute-bound
  inner loops.
* raw-passes: the three per-dispatch pass calls (set pipeline, set bind group, dispatch) straight to
  wgpu-native, without wgpu-py's argument conversion, offsets array and error scope per call (about 2 us
  of the 3.5 us they cost). Pass commands are validated when the pass ends, which still goes through
  wgpu-py, so errors surface as before.
* bind-groups: the entry array and descriptor filled directly, created through wgpu-py's error-checked
  call, so validation errors still raise; wgpu-py's own `create_bind_group` spends about 30 Python calls
  per entry, and a small training step misses the bind-group cache on most dispatches.

`probe` runs once per device, when it is created: it checks wgpu-py's version against the one these paths
were written for, then runs each path on a tiny kernel and checks its result, and records which are on
(`describe`, shown by `rumus info`). A path the probe turned off says why, with a warning unless the user
asked for the public API. After the probe nothing falls back per call: a path that is on and fails raises
`NativePathError`, naming the path and RUMUS_WGPU_PUBLIC_API=1 (wgpu-py's public API only) as the way out.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from rumus_contracts import RumusError, config

PUBLIC_API = "RUMUS_WGPU_PUBLIC_API"
WRITTEN_FOR = "0.32."  # the wgpu-py release series whose private names these paths use (pyproject pins it)
PATHS = ("trusted-modules", "raw-passes", "bind-groups")

# (binding index, GPUBuffer, byte size) of each buffer binding, at offset 0
Entry = tuple[int, Any, int]
# the raw pass calls: set_pipeline(pass, pipeline), set_bind_group(pass, index, group, n_offsets, offsets),
# dispatch(pass, x, y, z), a one-element uint32 offsets array, and the C NULL for no offsets
PassCalls = tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], Any, Any]

_PROBE_WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> cfg: vec4<u32>;
@compute @workgroup_size(1) fn main() { out[0] = cfg.x + 1u; }
"""
_PROBE_OFFSET = 256  # the uniform is bound at a dynamic offset, as the recorder binds every kernel's
_PROBE_VALUE = 41


class NativePathError(RumusError):
    """A private fast path that the device's probe turned on failed later."""

    def __init__(self, path: str, what: str, exc: BaseException) -> None:
        super().__init__(f"wgpu: {what} failed on wgpu-py's private fast path '{path}': {type(exc).__name__}: "
                         f"{exc}. If the kernel itself is not at fault, wgpu-py's private layer has changed: set "
                         f"{PUBLIC_API}=1 to run on wgpu-py's public API only")
        self.path = path


def released(buffer: Any) -> bool:
    """Whether wgpu-py has already released this GPUBuffer's native handle (its `_internal` is then None).
    A correctness check of the buffer pool on either path, not a fast path: a handle wgpu-py released must
    never be cached for reuse."""
    return getattr(buffer, "_internal", True) is None


class NativeLayer:
    """Which private paths one device uses, and the calls that use them."""

    def __init__(self) -> None:
        self.version = ""
        self.off: dict[str, str] = {}  # path -> why it is off
        self._api: Any = None
        self._binds: tuple[Any, Any, Any] | None = None  # ffi.new, wgpuDeviceCreateBindGroup, GPUBindGroup
        # what the probe found (plain attributes: the programs and the recorder read them per kernel)
        self.trusted_modules = self.bind_groups = False
        self.pass_calls: PassCalls | None = None  # set when raw-passes is on

    @property
    def raw_passes(self) -> bool:
        return self.pass_calls is not None

    def settle(self) -> None:
        """Fix the paths' on/off flags from `off` once the probe is done."""
        self.trusted_modules = "trusted-modules" not in self.off
        self.bind_groups = "bind-groups" not in self.off
        if "raw-passes" in self.off:
            self.pass_calls = None

    def describe(self) -> str:
        """One line for `rumus info`: each path on or off (with why), and wgpu-py's version."""
        reasons = set(self.off.values())
        if len(self.off) == len(PATHS) and len(reasons) == 1:
            return f"off: {reasons.pop()} (wgpu-py {self.version})"
        parts = [f"{p} on" if p not in self.off else f"{p} off ({self.off[p]})" for p in PATHS]
        return f"{', '.join(parts)} (wgpu-py {self.version})"

    # -- the paths ----------------------------------------------------------------------------------
    def trusted_module(self, device: Any, code: str, label: str) -> Any:
        """A GPUShaderModule compiled without naga's runtime checks (only while trusted-modules is on)."""
        try:
            api = self._api
            source = api.new_struct_p("WGPUShaderSourceWGSL *", code=api.to_c_string_view(code))
            source[0].chain.next = api.ffi.NULL
            source[0].chain.sType = api.lib.WGPUSType_ShaderSourceWGSL
            desc = api.new_struct_p("WGPUShaderModuleDescriptor *",
                                    nextInChain=api.ffi.cast("WGPUChainedStruct *", source),
                                    label=api.to_c_string_view(label))
            handle = api.libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, desc, 0)
            if handle == api.ffi.NULL:
                raise RuntimeError("wgpuDeviceCreateShaderModuleTrusted returned NULL")
            return api.GPUShaderModule(label, handle, device)
        except Exception as exc:
            raise NativePathError("trusted-modules", f"compiling kernel '{label}'", exc) from exc

    def bind_group(self, device: Any, layout: Any, entries: Sequence[Entry]) -> Any:
        """wgpu-py's GPUBindGroup for buffer `entries`, made natively (only while bind-groups is on)."""
        try:
            binds = self._binds
            if binds is None:
                api = self._api
                binds = self._binds = (api.ffi.new, api.libf.wgpuDeviceCreateBindGroup, api.GPUBindGroup)
            new, create, group_cls = binds
            arr = new("WGPUBindGroupEntry[]", len(entries))  # zeroed: no chain, sampler, texture view
            for i, (binding, gpu, size) in enumerate(entries):
                e = arr[i]
                e.binding = binding
                e.buffer = gpu._internal
                e.size = size
            desc = new("WGPUBindGroupDescriptor *")  # zeroed label: the empty string view
            desc.layout = layout._internal
            desc.entries = arr
            desc.entryCount = len(entries)
            return group_cls("", create(device._internal, desc), device)
        except Exception as exc:
            raise NativePathError("bind-groups", "creating a bind group", exc) from exc

    def handle(self, obj: Any) -> Any:
        """The native handle of a wgpu-py object (a pass, a pipeline) for the raw pass calls."""
        try:
            return obj._internal
        except AttributeError as exc:
            raise NativePathError("raw-passes", f"reading the native handle of {type(obj).__name__}", exc) from exc


def probe(device: Any) -> NativeLayer:
    """Which private paths work on `device` (a GPUDevice), each checked by running it."""
    import wgpu

    layer = NativeLayer()
    layer.version = getattr(wgpu, "__version__", "?")
    why = ""
    if config.flag(PUBLIC_API):
        why = f"{PUBLIC_API}=1"
    elif not layer.version.startswith(WRITTEN_FOR):
        why = f"written for wgpu-py {WRITTEN_FOR}x"
    else:
        try:
            from wgpu.backends.wgpu_native import _api
            layer._api = _api
        except Exception as exc:  # the whole layer is missing: every path is off, and says so
            why = f"no wgpu.backends.wgpu_native._api ({type(exc).__name__}: {exc})"
    if why:
        layer.off = dict.fromkeys(PATHS, why)
    else:
        _probe_paths(layer, device)
    layer.settle()
    if layer.off and not why.startswith(PUBLIC_API):
        warnings.warn(f"rumus_wgpu: wgpu-py's private fast paths are off, so kernels run slower: "
                      f"{layer.describe()}; {PUBLIC_API}=1 chooses the public API without this warning",
                      RuntimeWarning, stacklevel=3)
    return layer


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}".rstrip(": ")


def _probe_paths(layer: NativeLayer, device: Any) -> None:
    """Run the probe kernel through each path in turn; a path whose call raises or whose result is wrong
    is turned off with the reason."""
    import wgpu

    api = layer._api
    entries = [{"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "storage"}},
               {"binding": 1, "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": "uniform", "has_dynamic_offset": True}}]
    bgl = device.create_bind_group_layout(entries=entries)
    pipeline_layout = device.create_pipeline_layout(bind_group_layouts=[bgl])
    out = device.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
                               | wgpu.BufferUsage.COPY_DST)
    uniform = device.create_buffer(size=2 * _PROBE_OFFSET, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    words = bytearray(2 * _PROBE_OFFSET)
    words[_PROBE_OFFSET:_PROBE_OFFSET + 4] = _PROBE_VALUE.to_bytes(4, "little")
    device.queue.write_buffer(uniform, 0, bytes(words))

    def pipeline(module: Any) -> Any:
        return device.create_compute_pipeline(layout=pipeline_layout, compute={"module": module, "entry_point": "main"})

    def run(pipe: Any, group: Any, raw: PassCalls | None) -> bool:
        device.queue.write_buffer(out, 0, bytes(16))
        encoder = device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        if raw is None:
            cpass.set_pipeline(pipe)
            cpass.set_bind_group(0, group, [_PROBE_OFFSET])
            cpass.dispatch_workgroups(1, 1, 1)
        else:
            set_pipeline, set_bind_group, dispatch, offsets, _ = raw
            handle = cpass._internal
            set_pipeline(handle, pipe._internal)
            offsets[0] = _PROBE_OFFSET
            set_bind_group(handle, 0, group._internal, 1, offsets)
            dispatch(handle, 1, 1, 1)
        cpass.end()
        device.queue.submit([encoder.finish()])
        got = int.from_bytes(bytes(device.queue.read_buffer(out, 0, 4)), "little")
        return got == _PROBE_VALUE + 1

    public_module = device.create_shader_module(label="rumus native probe", code=_PROBE_WGSL)
    public_pipe = pipeline(public_module)
    public_group = device.create_bind_group(layout=bgl, entries=[
        {"binding": 0, "resource": {"buffer": out, "offset": 0, "size": 16}},
        {"binding": 1, "resource": {"buffer": uniform, "offset": 0, "size": 16}}])

    pipe = public_pipe
    try:
        pipe = pipeline(layer.trusted_module(device, _PROBE_WGSL, "rumus native probe (trusted)"))
        if not run(pipe, public_group, None):
            layer.off["trusted-modules"], pipe = "the probe kernel gave a wrong result", public_pipe
    except Exception as exc:
        layer.off["trusted-modules"], pipe = _why(exc.__cause__ or exc), public_pipe

    group = public_group
    try:
        group = layer.bind_group(device, bgl, [(0, out, 16), (1, uniform, 16)])
        if not run(public_pipe, group, None):
            layer.off["bind-groups"], group = "the probe kernel gave a wrong result", public_group
    except Exception as exc:
        layer.off["bind-groups"], group = _why(exc.__cause__ or exc), public_group

    try:
        lib = api.lib
        raw: PassCalls = (lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup,
                          lib.wgpuComputePassEncoderDispatchWorkgroups, api.ffi.new("uint32_t[1]"), api.ffi.NULL)
        if run(pipe, group, raw):
            layer.pass_calls = raw
        else:
            layer.off["raw-passes"] = "the probe kernel gave a wrong result"
    except Exception as exc:
        layer.off["raw-passes"] = _why(exc)
    for buf in (out, uniform):
        buf.destroy()

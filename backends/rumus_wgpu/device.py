"""Adapters and devices: `wgpu:0`, `wgpu:1`, ... ordered discrete GPUs first.

Each device is requested with the adapter's own limits and, when present, the `shader-f16`,
`timestamp-query` and `subgroup` features; it owns a buffer pool, a command recorder, a program cache
and the probe of wgpu-py's private fast paths (native.py) that the recorder and the programs use.
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import BackendUnavailable

from . import native
from .pipelines import Programs
from .pool import BufferPool
from .recorder import Recorder

WANTED_FEATURES = ("shader-f16", "timestamp-query", "subgroup")
REPORTED_LIMITS = (
    "max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup", "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage", "max-uniform-buffer-binding-size",
    "min-storage-buffer-offset-alignment", "min-uniform-buffer-offset-alignment",
)
_TYPE_ORDER = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 3, "CPU": 4}


def list_adapters() -> list[Any]:
    """Usable adapters, discrete GPUs first. OpenGL adapters are dropped when another backend exists
    (the GL path of wgpu lacks compute features and shows the same hardware twice)."""
    try:
        import wgpu
    except ImportError as exc:
        raise BackendUnavailable(f"the 'wgpu' package is not installed ({exc}); "
                                 f"install it with: pip install 'rumus[gpu]'") from None
    try:
        adapters = list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as exc:
        raise BackendUnavailable(f"wgpu could not enumerate adapters: {type(exc).__name__}: {exc}") from None
    if any(a.info.get("backend_type") != "OpenGL" for a in adapters):
        adapters = [a for a in adapters if a.info.get("backend_type") != "OpenGL"]
    if not adapters:
        raise BackendUnavailable("no WebGPU adapter found (no Vulkan, Metal or D3D12 driver); on Linux "
                                 "install a Vulkan driver, e.g. Mesa's lavapipe (mesa-vulkan-drivers)")
    return sorted(adapters, key=lambda a: _TYPE_ORDER.get(a.info.get("adapter_type", "Unknown"), 3))


def describe(adapter: Any) -> str:
    info = adapter.info
    return (f"{info.get('device') or info.get('vendor') or 'adapter'} "
            f"({info.get('backend_type', '?')}, {info.get('adapter_type', '?')})")


class WgpuDevice:
    """One GPUDevice with its pool, recorder and program cache."""

    def __init__(self, adapter: Any, index: int) -> None:
        self.adapter = adapter
        self.index = index
        self.name = f"wgpu:{index}"
        self.description = describe(adapter)
        features = [f for f in WANTED_FEATURES if f in adapter.features]
        self.device = self._request(adapter, features)
        self.features = tuple(sorted(set(features) & set(self.device.features)))
        self.limits = {k: int(self.device.limits[k]) for k in REPORTED_LIMITS if k in self.device.limits}
        self.max_binding = self.limits.get("max-storage-buffer-binding-size", 1 << 27)
        self.max_groups = self.limits.get("max-compute-workgroups-per-dimension", 65535)
        self.shared_bytes = self.limits.get("max-compute-workgroup-storage-size", 16384)
        self.pool = BufferPool(self.device, self.max_binding, self.limits.get("max-buffer-size", 1 << 28))
        # wgpu-py's private fast paths this device uses, each checked once here (native.py; `rumus info`)
        self.native = native.probe(self.device)
        self.description += f"; fast paths: {self.native.describe()}"
        self.recorder = Recorder(self)
        self.programs = Programs(self)
        # per-op launch plans keyed by operand layouts: (program, uniform bytes, grid), see elementwise
        self.launch_plans: dict[Any, Any] = {}

    @staticmethod
    def _request(adapter: Any, features: list[str]) -> Any:
        # ask for everything the adapter offers; fall back to the compute limits, then to defaults
        full = {k: v for k, v in adapter.limits.items() if v}
        compute = {k: adapter.limits[k] for k in REPORTED_LIMITS[:6] if k in adapter.limits}
        last: Exception | None = None
        for limits in (full, compute, {}):
            try:
                return adapter.request_device_sync(required_features=features, required_limits=limits)
            except Exception as exc:  # a driver refusing one limit must not cost the whole device
                last = exc
        raise BackendUnavailable(f"could not open {describe(adapter)}: {last}")

    @property
    def has_f16(self) -> bool:
        return "shader-f16" in self.features

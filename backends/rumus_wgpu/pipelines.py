"""WGSL sources, compiled programs and their caches.

A `Program` is a compute pipeline with an explicit bind-group layout derived from the shader's own
declarations (group 0: storage buffers in binding order, then at most one uniform buffer bound with a
dynamic offset). Programs are cached per device by a key of (shader, entry point, dtypes/variant);
bind groups are cached per program by the buffers they bind, so a training loop that reuses pooled
buffers also reuses bind groups.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from functools import cache
from importlib import resources
from operator import attrgetter
from typing import Any

from rumus_contracts import DType, DTypeError, RumusError, config

from .native import NativePathError

_BINDING = re.compile(
    r"@(?:group\(\s*(\d+)\s*\)\s*@binding\(\s*(\d+)\s*\)|binding\(\s*(\d+)\s*\)\s*@group\(\s*(\d+)\s*\))"
    r"\s*var\s*<\s*(storage|uniform)\s*(?:,\s*(read_write|read))?\s*>")
BIND_GROUP_CACHE = 2048
_BIND_KEY = attrgetter("bind_key")  # WgpuBuffer.bind_key: what a cached bind group is keyed by
CHECKED = "RUMUS_WGPU_CHECKED"  # set: the GEMM keeps naga's bounds checks too (A/B of trusted modules)


@cache
def shader_source(name: str) -> str:
    """The text of shaders/<name>.wgsl: the top-level shaders/ folder, installed as the package
    `rumus_wgpu.shaders` (setup.py maps it, in a wheel and in an editable install alike)."""
    return resources.files("rumus_wgpu.shaders").joinpath(f"{name}.wgsl").read_text(encoding="utf-8")


def render(name: str, scalar: str = "f32", include: tuple[str, ...] = (), **slots: str) -> str:
    """shaders/<name>.wgsl after the `include`d sources, every {{SLOT}} filled, `alias scalar = f32;`
    set to `scalar`; the int64 helpers are added when the result uses them."""
    src = "\n".join(shader_source(n) for n in (*include, name))
    for key, value in slots.items():
        src = src.replace("{{" + key + "}}", value)
    if "i64_" in src and "fn i64_add" not in src:
        src = shader_source("int64") + src
    return with_scalar(src, scalar)


def with_scalar(src: str, scalar: str) -> str:
    if scalar != "f32":
        src = src.replace("alias scalar = f32;", f"alias scalar = {scalar};")
    if "f16" in src and "enable f16;" not in src:
        src = "enable f16;\n" + src
    if "{{" in src:
        raise AssertionError(f"unfilled shader slot near: {src[src.index('{{'):][:40]}")
    return src


def wgsl_scalar(dtype: DType) -> str:
    return {"float32": "f32", "float16": "f16"}[dtype.name]


def parse_bindings(source: str) -> list[tuple[int, str]]:
    """[(binding, 'storage' | 'read-only-storage' | 'uniform')] of group 0, sorted by binding."""
    out = []
    for m in _BINDING.finditer(source):
        group = int(m.group(1) or m.group(4))
        binding = int(m.group(2) or m.group(3))
        if group != 0:
            raise RumusError("wgpu kernels use bind group 0 only")
        space, access = m.group(5), m.group(6)
        kind = "uniform" if space == "uniform" else "storage" if access == "read_write" else "read-only-storage"
        out.append((binding, kind))
    out.sort()
    if [b for b, _ in out] != list(range(len(out))):
        raise RumusError(f"wgpu kernel bindings must be numbered 0..n-1 without gaps, got {[b for b, _ in out]}")
    if any(k == "uniform" for _, k in out[:-1]):
        raise RumusError("a wgpu kernel may declare one uniform buffer, and only as its last binding")
    return out


class Program:
    """A compiled compute pipeline plus what it takes to bind it."""

    def __init__(self, dev: Any, source: str, entry_point: str, label: str, uniform_size: int = 256,
                 trusted: bool = False) -> None:
        import wgpu

        self.dev = dev
        self.label = label
        bindings = parse_bindings(source)
        self.uniform_size = 0
        if bindings and bindings[-1][1] == "uniform":
            self.uniform_size = (max(uniform_size, 16) + 255) & ~255
        self.storage_bindings = [b for b, k in bindings if k != "uniform"]
        entries = [{"binding": b, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": k, "has_dynamic_offset": k == "uniform"}} for b, k in bindings]
        device = dev.device
        try:
            if trusted and dev.native.trusted_modules and not config.flag(CHECKED):
                module = dev.native.trusted_module(device, source, label)
            else:
                module = device.create_shader_module(label=label, code=source)
            self.layout = device.create_bind_group_layout(entries=entries)
            self.pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[self.layout]),
                compute={"module": module, "entry_point": entry_point})
        except Exception as exc:
            if "f16" in source and "shader-f16" not in dev.features:
                raise DTypeError(f"{dev.name} has no shader-f16 support, so float16 kernels cannot run there; "
                                 f"use float32") from None
            if isinstance(exc, NativePathError):
                raise
            raise RumusError(f"wgpu: compiling kernel '{label}' failed: {exc}") from exc
        # the native handle the recorder's raw pass calls set (None: it uses wgpu-py's pass methods)
        self.pipeline_handle = dev.native.handle(self.pipeline) if dev.native.raw_passes else None
        self._bind_groups: dict[Hashable, Any] = {}

    def bind_group(self, buffers: list[Any], uniform_gpu: Any) -> Any:
        key = tuple(map(_BIND_KEY, buffers))  # C-level: no comprehension frame per dispatch
        hit = self._bind_groups.get(key)
        if hit is not None:
            return hit[0]
        if len(buffers) != len(self.storage_bindings):
            raise RumusError(f"wgpu kernel '{self.label}' declares {len(self.storage_bindings)} storage "
                             f"bindings but was given {len(buffers)} buffers")
        layer = self.dev.native
        if layer.bind_groups:  # made natively, without wgpu-py's descriptor building (native.py)
            native = [(i, b.gpu, b.bind_size) for i, b in enumerate(buffers)]
            if self.uniform_size:
                native.append((len(buffers), uniform_gpu, self.uniform_size))
            group = layer.bind_group(self.dev.device, self.layout, native)
        else:
            entries = [{"binding": i, "resource": {"buffer": b.gpu, "offset": 0, "size": b.bind_size}}
                       for i, b in enumerate(buffers)]
            if self.uniform_size:
                entries.append({"binding": len(buffers),
                                "resource": {"buffer": uniform_gpu, "offset": 0, "size": self.uniform_size}})
            group = self.dev.device.create_bind_group(layout=self.layout, entries=entries)
        if len(self._bind_groups) >= BIND_GROUP_CACHE:
            self._bind_groups.pop(next(iter(self._bind_groups)))
        # the GPU buffers are kept with the group so their ids cannot be reused while it is cached
        self._bind_groups[key] = (group, [b.gpu for b in buffers])
        return group

    def clear(self) -> None:
        self._bind_groups.clear()


class Programs:
    """Per-device program cache."""

    def __init__(self, dev: Any) -> None:
        self.dev = dev
        self._cache: dict[Hashable, Program] = {}
        self.compiled = 0

    def get(self, key: Hashable, build: Callable[[], str], entry_point: str = "main",
            uniform_size: int = 256, trusted: bool = False) -> Program:
        prog = self._cache.get(key)
        if prog is None:
            prog = self._cache[key] = Program(self.dev, build(), entry_point, str(key)[:120], uniform_size, trusted)
            self.compiled += 1
        return prog

    def clear_bind_groups(self) -> None:
        for p in self._cache.values():
            p.clear()

    def __len__(self) -> int:
        return len(self._cache)

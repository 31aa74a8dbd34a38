"""The public backend API (rumus.backend_api), the Backend protocol's adapt_kernel, and discovery
through entry points only."""

from __future__ import annotations

import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import rumus as rm
import rumus_contracts.plugins as plugin_loader
from rumus import backend_api as api
from rumus_contracts import (
    Backend, BackendRegistry, BackendUnavailable, PluginError, ShaderKernel, callable_kernel, fixed_i16, float32,
)

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contract_names_every_private_core_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].endswith("use only rumus's public API")]
    core = Path(rm.__file__).parent
    private = {f"rumus.{p.stem}" for p in core.glob("_*.py") if not p.stem.startswith("__")}
    private |= {f"rumus.{p.name}" for p in core.glob("_*") if p.is_dir() and not p.name.startswith("__")}
    assert private and set(contract["forbidden_modules"]) == private, "update the contract in pyproject.toml"
    assert {"rumus_conformance", "rumus_hello"} <= set(contract["source_modules"])


def test_backends_are_found_through_entry_points_only():
    assert not hasattr(plugin_loader, "BUILTIN_PLUGINS")  # no backend names written in the contracts
    ours = {ep.name: ep.value for ep in entry_points(group="rumus") if ep.dist and ep.dist.metadata["Name"] == "rumus"}
    assert ours == {"cpu": "rumus_cpu.plugin", "wgpu": "rumus_wgpu.plugin"}  # registered by `pip install -e .`
    loaded = api.plugins()
    assert loaded.builtin[:3] == ["rumus-core", "cpu", "wgpu"]
    assert loaded.loaded[0] == "rumus-core"


def test_from_storage_keeps_raw_values():
    raw = np.array([-3, 0, 256, 32767], dtype=np.int16)
    t = api.from_storage(raw, fixed_i16(8))
    assert t.dtype == fixed_i16(8) and t.shape == (4,)
    np.testing.assert_array_equal(t.fixed_i16_data(), raw)


def test_kernel_lookup_returns_the_adapted_winning_kernel():
    cpu = api.backend("cpu")
    kernel = api.kernel("add", cpu, float32)
    entry = api.plugins().kernels.find_entry("add", "cpu", float32)
    assert entry is not None and entry.owner == "cpu" and kernel is cpu.adapt_kernel(entry.kernel)
    assert api.op_schema("add").name == "add"
    assert api.default_device() == rm.Device.parse("cpu")


def test_adapt_kernel_is_part_of_the_backend_protocol():
    class NoAdapt:
        name = "x"

        def devices(self): ...
        def allocate(self, device, numel, dtype): ...
        def from_numpy(self, device, array, dtype): ...
        def to_numpy(self, arg): ...
        def copy_(self, dst, src): ...
        def synchronize(self, device): ...
        def capabilities(self, device): ...

    assert not isinstance(NoAdapt(), Backend)
    assert isinstance(api.backend("cpu"), Backend)
    registry = BackendRegistry()
    registry.register("noadapt", NoAdapt)
    with pytest.raises(BackendUnavailable, match="adapt_kernel"):
        registry.get("noadapt")


def test_default_adapt_kernel_refuses_shader_kernels():
    def k(outputs, inputs, attrs):
        return None

    assert callable_kernel("cpu", k) is k
    shader = ShaderKernel("wgsl", "@compute @workgroup_size(1) fn main() {}", "main", lambda o, i, a: (1, 1, 1))
    with pytest.raises(PluginError, match="cannot compile a wgsl ShaderKernel"):
        api.backend("cpu").adapt_kernel(shader)

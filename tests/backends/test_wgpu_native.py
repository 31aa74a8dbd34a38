"""The probe of wgpu-py's private fast paths (rumus_wgpu/native.py): what it reports with the pinned wgpu-py,
with RUMUS_WGPU_PUBLIC_API=1, with another wgpu-py version and with a private name gone (that path off, with
the reason and a warning, the others on); and that a path the probe turned on raises when it fails later,
naming the path and RUMUS_WGPU_PUBLIC_API=1, instead of quietly falling back."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("wgpu")
import wgpu  # noqa: E402
from wgpu.backends.wgpu_native import _api  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import BackendUnavailable, backend_api  # noqa: E402
from rumus_contracts import Device  # noqa: E402
from rumus_wgpu import native  # noqa: E402
from rumus_wgpu.native import NativePathError  # noqa: E402

try:
    BACKEND = backend_api.backend("wgpu")
    CAPS = BACKEND.capabilities(Device("wgpu", 0))
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)
DEV = BACKEND.device(0)


def _program_with_uniform() -> object:
    (rm.ones(8, device="wgpu") + 1).numpy()  # compiles at least one program with a uniform binding
    return next(p for p in DEV.programs._cache.values() if p.uniform_size)


def _probe() -> native.NativeLayer:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a probe with every path on warns about nothing
        return native.probe(DEV.device)


def test_every_path_on_with_the_pinned_wgpu_py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUMUS_WGPU_PUBLIC_API", raising=False)
    layer = _probe()
    assert layer.off == {} and layer.trusted_modules and layer.bind_groups and layer.raw_passes
    assert layer.describe() == f"trusted-modules on, raw-passes on, bind-groups on (wgpu-py {wgpu.__version__})"
    assert f"fast paths: {DEV.native.describe()}" in CAPS.description  # what `rumus info` prints


def test_public_api_turns_every_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_WGPU_PUBLIC_API", "1")
    layer = _probe()
    assert not (layer.trusted_modules or layer.bind_groups or layer.raw_passes)
    assert layer.describe() == f"off: RUMUS_WGPU_PUBLIC_API=1 (wgpu-py {wgpu.__version__})"


def test_another_wgpu_py_version_turns_every_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUMUS_WGPU_PUBLIC_API", raising=False)
    monkeypatch.setattr(wgpu, "__version__", "0.99.0")
    with pytest.warns(RuntimeWarning, match="fast paths are off"):
        layer = native.probe(DEV.device)
    assert layer.describe() == "off: written for wgpu-py 0.32.x (wgpu-py 0.99.0)"


class _ApiWithout:
    """wgpu-py's _api module as the probe sees it, less one name (wgpu-py's own code keeps it)."""

    def __init__(self, missing: str) -> None:
        self.missing = missing

    def __getattr__(self, name: str) -> object:
        if name == self.missing:
            raise AttributeError(f"module 'wgpu.backends.wgpu_native._api' has no attribute {name!r}")
        return getattr(_api, name)


def test_a_missing_private_name_turns_its_path_off_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import wgpu.backends.wgpu_native as package
    monkeypatch.delenv("RUMUS_WGPU_PUBLIC_API", raising=False)
    monkeypatch.setattr(package, "_api", _ApiWithout("GPUBindGroup"))
    with pytest.warns(RuntimeWarning, match="bind-groups off .*AttributeError"):
        layer = native.probe(DEV.device)
    assert not layer.bind_groups and layer.trusted_modules and layer.raw_passes
    assert "bind-groups off (AttributeError" in layer.describe()


def test_a_trusted_module_call_that_fails_turns_that_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> object:
        raise RuntimeError("no such entry point")
    monkeypatch.delenv("RUMUS_WGPU_PUBLIC_API", raising=False)
    monkeypatch.setattr(_api.libf, "wgpuDeviceCreateShaderModuleTrusted", refuse)
    with pytest.warns(RuntimeWarning, match="trusted-modules off"):
        layer = native.probe(DEV.device)
    assert layer.off == {"trusted-modules": "RuntimeError: no such entry point"}


on_here = pytest.mark.skipif(not (DEV.native.bind_groups and DEV.native.raw_passes),
                             reason=f"this process's device has the private paths off: {DEV.native.describe()}")


@on_here
def test_a_path_that_fails_after_the_probe_raises_naming_it() -> None:
    prog: Any = _program_with_uniform()
    buf = BACKEND.allocate(Device("wgpu", 0), 16, CAPS.dtypes[0])
    n = len(prog.storage_bindings)
    # one binding short of the layout: wgpu's validation still runs on the native bind-group path
    with pytest.raises(NativePathError, match="(?s)'bind-groups'.*Number of bindings.*RUMUS_WGPU_PUBLIC_API=1"):
        DEV.native.bind_group(DEV.device, prog.layout, [(i, buf.gpu, buf.bind_size) for i in range(n)])
    with pytest.raises(NativePathError, match="'raw-passes'.*RUMUS_WGPU_PUBLIC_API=1"):
        DEV.native.handle(object())
    entries = [(i, buf.gpu, buf.bind_size) for i in range(n)] + [(n, DEV.recorder.uniform_gpu, prog.uniform_size)]
    assert DEV.native.bind_group(DEV.device, prog.layout, entries)._internal is not None


@on_here
def test_a_raw_pass_call_that_fails_raises_and_leaves_the_recorder_usable() -> None:
    x = rm.ones(8, device="wgpu")
    prog: Any = _program_with_uniform()
    handle, prog.pipeline_handle = prog.pipeline_handle, "not a pipeline"
    try:
        with pytest.raises(NativePathError, match="'raw-passes'.*RUMUS_WGPU_PUBLIC_API=1"):
            DEV.recorder._pass_pipeline = None
            DEV.recorder.dispatch(prog, [x._arg.buffer] * len(prog.storage_bindings), b"", (1, 1, 1))
    finally:
        prog.pipeline_handle = handle
        DEV.recorder._pass_pipeline = None
    np.testing.assert_array_equal((x * 3).numpy(), np.full(8, 3, np.float32))


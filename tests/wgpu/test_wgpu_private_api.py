"""Both paths of the WebGPU backend: wgpu-py's private native layer (trusted GEMM shader modules,
direct per-dispatch pass calls, bind groups made without wgpu-py's descriptor checks) and the public-API
fallback (RUMUS_WGPU_PUBLIC_API=1) give the same bits, and each run really takes the path it claims.
wgpu-py is pinned (pyproject.toml) to the range where the private names exist; a wgpu upgrade that drops
them shows up here as fast_path False."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rumus import BackendUnavailable, backend_api

try:
    backend_api.backend("wgpu").devices()
except BackendUnavailable as exc:
    pytest.skip(f"wgpu unavailable: {exc}", allow_module_level=True)

SCRIPT = r"""
import json
import numpy as np
import rumus as rm
from rumus import backend_api
import rumus_wgpu.pipelines as pipelines

trusted = []  # one entry per GEMM shader compiled: True when a trusted (private-API) module was made
original = pipelines.trusted_module
def counted(*a):
    module = original(*a)
    trusted.append(module is not None)
    return module
pipelines.trusted_module = counted

rng = np.random.default_rng(0)
a = rng.standard_normal((70, 50)).astype(np.float32)
b = rng.standard_normal((50, 30)).astype(np.float32)
x = rm.tensor(a, device="wgpu", requires_grad=True)
w = rm.tensor(b, device="wgpu", requires_grad=True)
y = rm.relu(x @ w).sum(dim=1)
(y * y).sum().backward()
backend = backend_api.backend("wgpu")
recorder = backend.device(0).recorder
print(json.dumps({"y": y.tolist(), "gx": x.grad.tolist(), "gw": w.grad.tolist(),
                  "fast_path": recorder._native is not None, "trusted": any(trusted),
                  "native_groups": backend.device(0).make_bind_group is not None,
                  "dispatches": recorder.dispatches}))
"""


def _run(**env: str) -> dict:
    full = {**os.environ, "RUMUS_BACKEND": "wgpu", **env}
    full.pop("RUMUS_WGPU_CHECKED", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.environ.get("RUMUS_WGPU_IMPL", "").strip().lower() == "dawn",
                    reason="Dawn has no wgpu-native private layer: the backend uses the public API there")
def test_private_fast_path_and_public_fallback_agree_bit_for_bit():
    fast = _run()
    public = _run(RUMUS_WGPU_PUBLIC_API="1")
    assert fast["fast_path"] and fast["trusted"] and fast["native_groups"], \
        "the pinned wgpu should offer the private fast path"
    assert not public["fast_path"] and not public["trusted"] and not public["native_groups"], \
        "RUMUS_WGPU_PUBLIC_API=1 must avoid private names"
    assert fast["dispatches"] > 0 and public["dispatches"] == fast["dispatches"]
    for key in ("y", "gx", "gw"):
        assert fast[key] == public[key], key
    # and both are right: float64 reference of the same computation
    rng = np.random.default_rng(0)
    a = rng.standard_normal((70, 50)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((50, 30)).astype(np.float32).astype(np.float64)
    h = a @ b
    y = np.maximum(h, 0).sum(axis=1)
    gh = (2 * y)[:, None] * (h > 0)
    np.testing.assert_allclose(fast["y"], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fast["gx"], gh @ b.T, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(fast["gw"], a.T @ gh, rtol=1e-4, atol=1e-3)


def test_native_bind_group_errors_still_raise():
    """The native bind-group path keeps wgpu's validation: a group that does not match its layout raises."""
    if not backend_api.backend("wgpu").device(0).make_bind_group:
        pytest.skip("no private wgpu-py layer")
    import rumus as rm
    dev = backend_api.backend("wgpu").device(0)
    x = rm.ones(8, device="wgpu") + 1  # compiles at least one program with a uniform binding
    program = next(p for p in dev.programs._cache.values() if p.uniform_size)
    buf = x._storage.buffer
    n = len(program.storage_bindings)
    with pytest.raises(Exception, match="(?i)bind"):  # one binding short of the layout
        dev.make_bind_group(dev.device, program.layout, [(i, buf.gpu, buf.bind_size) for i in range(n)])
    entries = [(i, buf.gpu, buf.bind_size) for i in range(n)] + [(n, dev.recorder.uniform_gpu, program.uniform_size)]
    assert dev.make_bind_group(dev.device, program.layout, entries)._internal is not None

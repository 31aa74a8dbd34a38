"""The reference backend (examples/backend-numpy), loaded from its source folder without pip: it loads
cleanly next to the built-in backends, and a few training steps on device "numpy" match the cpu backend.
Its full conformance run is a CI step of its own (.ci/run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rumus import backend_api as api
from rumus_contracts.plugins import Candidate

SOURCE = Path(__file__).resolve().parents[2] / "examples" / "backend-numpy"


def train_steps(device: str, steps: int = 3) -> dict[str, Any]:
    """Losses and final parameters of a small MLP trained on a fixed batch (same init on every device)."""
    import rumus as rm
    from rumus import nn

    rm.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    model.to(device)
    rng = np.random.default_rng(1)
    x = rm.tensor(rng.normal(size=(8, 6)).astype(np.float32), device=device)
    y = rm.tensor(rng.normal(size=(8, 3)).astype(np.float32), device=device)
    losses = []
    for _ in range(steps):
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        with rm.no_grad():  # plain SGD written with core ops: runs on the primitives alone
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(float(loss.item()))
    return {"losses": losses, "params": {k: v.numpy().tolist() for k, v in model.state_dict().items()},
            "device": str(x.device)}


def _dist_info(folder: Path) -> None:
    """An installed-looking distribution for the source folder: the entry point pip would write."""
    info = folder / "rumus_backend_numpy-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rumus-backend-numpy\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[rumus]\nnumpy = rumus_numpy.plugin\n")


def test_plugin_loads_cleanly_from_the_source_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SOURCE))
    monkeypatch.setenv("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "1")  # an installed copy is not discovered too
    loaded = api.load_fresh([Candidate("numpy", "rumus_numpy.plugin", False)])
    assert not loaded.all_failures(), loaded.all_failures()
    assert "numpy" in loaded.loaded and "numpy" in loaded.backends.names()
    ops = set(loaded.kernels.ops_for("numpy"))
    assert {"add", "exp", "where", "sum", "matmul", "copy", "gather"} <= ops
    assert not ops & {"softmax", "relu_backward", "index_select", "clamp"}  # no primitives: decomposed


def test_it_registers_exactly_the_primitive_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    import rumus_contracts
    primitives = getattr(rumus_contracts, "PRIMITIVES", None)
    if primitives is None:
        pytest.skip("rumus_contracts.PRIMITIVES is not defined in this checkout yet")
    monkeypatch.syspath_prepend(str(SOURCE))
    monkeypatch.setenv("RUMUS_DISABLE_PLUGIN_AUTOLOAD", "1")
    loaded = api.load_fresh([Candidate("numpy", "rumus_numpy.plugin", False)])
    assert set(loaded.kernels.ops_for("numpy")) == set(primitives)


def test_training_steps_match_cpu(tmp_path: Path) -> None:
    _dist_info(tmp_path)
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from test_backend_numpy import train_steps\n"
            "print(json.dumps(train_steps('numpy')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SOURCE), str(tmp_path), *sys.path]),
           "RUMUS_PLUGINS": "numpy"}
    env.pop("RUMUS_DISABLE_PLUGIN_AUTOLOAD", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = train_steps("cpu")
    assert got["device"] == "numpy:0"
    assert got["losses"][-1] < got["losses"][0]  # it trains
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5)
    for name, value in want["params"].items():
        np.testing.assert_allclose(got["params"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)

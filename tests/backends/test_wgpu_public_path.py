"""wgpu-py's private fast paths (rumus_wgpu/native.py: trusted shader modules, raw pass calls, native bind
groups) and its public API (RUMUS_WGPU_PUBLIC_API=1) give the same bits on a representative set of ops
(wgpu_paths_run.py: elementwise, GEMM at two tile plans, conv forward and backward, row reductions, three
SGD steps of an MLP), each run takes the path it claims, and both match float64 references."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("wgpu")
from wgpu_direct import BACKEND  # noqa: E402,F401  # skips this module without an adapter

from wgpu_paths_run import inputs  # noqa: E402

SCRIPT = Path(__file__).with_name("wgpu_paths_run.py")


def _run(**env: str) -> dict[str, Any]:
    full = {**os.environ, "RUMUS_BACKEND": "wgpu", **env}
    for name in ("RUMUS_WGPU_CHECKED", "RUMUS_WGPU_PUBLIC_API", "RUMUS_WGPU_GEMM", "RUMUS_WGPU_NOVEC"):
        if name not in env:
            full.pop(name, None)
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=full, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def runs() -> tuple[dict[str, Any], dict[str, Any]]:
    return _run(), _run(RUMUS_WGPU_PUBLIC_API="1")


def _references() -> dict[str, Any]:
    x = {k: v.astype(np.float64) for k, v in inputs().items()}
    a = x["a"]
    z = a * 2 + 1
    ref: dict[str, Any] = {
        "gelu": 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))),
        "where": np.where(a > 0, a, -a * 0.5), "exp_sub": np.exp(a - a.max()),
        "gemm_small": a @ x["b"], "gemm_tiled": x["p"] @ x["q"], "sum_rows": a.sum(1), "mean_cols": a.mean(0)}
    e = np.exp(a - a.max(1, keepdims=True))
    ref["softmax"] = e / e.sum(1, keepdims=True)
    pad = np.pad(x["img"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(2, 3))  # [n, c, i, j, ki, kj]
    conv = np.einsum("ncijkl,ockl->noij", win, x["ker"])
    g = 2 * conv
    dpad = np.zeros_like(pad)
    for ki in range(3):
        for kj in range(3):
            dpad[:, :, ki:ki + 9, kj:kj + 9] += np.einsum("noij,oc->ncij", g, x["ker"][:, :, ki, kj])
    ref["conv"], ref["conv_dx"] = conv, dpad[:, :, 1:-1, 1:-1]
    ref["conv_dw"] = np.einsum("noij,ncijkl->ockl", g, win)
    w1, w2, xs, ys, losses = x["w1"], x["w2"], x["mlp_x"], x["mlp_y"], []
    for _ in range(3):
        h = np.maximum(xs @ w1.T, 0)
        d = h @ w2.T - ys
        losses.append((d * d).mean())
        dy = 2 * d / d.size
        dh = (dy @ w2) * (h > 0)
        w1, w2 = w1 - 0.1 * dh.T @ xs, w2 - 0.1 * dy.T @ h
    ref["mlp_loss"], ref["mlp_w1"], ref["mlp_w2"] = losses, w1, w2
    return ref


def test_private_and_public_paths_agree_bit_for_bit(runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    fast, public = runs
    assert fast["described"].startswith("trusted-modules on, raw-passes on, bind-groups on"), \
        f"the pinned wgpu-py should offer every private fast path: {fast['described']}"
    assert fast["raw_passes"] and fast["used"]["trusted-modules"] > 0 and fast["used"]["bind-groups"] > 0
    assert public["described"].startswith("off: RUMUS_WGPU_PUBLIC_API=1")
    assert not public["raw_passes"] and public["used"] == {"trusted-modules": 0, "bind-groups": 0}
    assert fast["dispatches"] == public["dispatches"] > 0
    for key, value in fast["results"].items():
        assert value == public["results"][key], key


@pytest.mark.parametrize("path", [0, 1], ids=["private", "public"])
def test_each_path_matches_float64_references(runs: tuple[dict[str, Any], dict[str, Any]], path: int) -> None:
    got = runs[path]["results"]
    for key, want in _references().items():
        np.testing.assert_allclose(np.asarray(got[key]), want, rtol=1e-4, atol=2e-4, err_msg=key)

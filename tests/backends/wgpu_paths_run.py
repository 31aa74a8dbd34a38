"""A representative set of wgpu ops (elementwise, GEMM at two tile plans, conv forward and backward, row
reductions, three SGD steps of a small MLP), run once in a fresh process; prints their results and which of
wgpu-py's private fast paths (rumus_wgpu/native.py) the run used, as one JSON line. test_wgpu_public_path.py
runs it with and without RUMUS_WGPU_PUBLIC_API=1 and compares."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import rumus as rm
from rumus import backend_api
from rumus_wgpu import native

F = rm.nn.functional
USED = {"trusted-modules": 0, "bind-groups": 0}


def _counted(path: str, method: Any) -> Any:
    def call(self: native.NativeLayer, *args: Any) -> Any:
        USED[path] += 1
        return method(self, *args)
    return call


native.NativeLayer.trusted_module = _counted("trusted-modules", native.NativeLayer.trusted_module)  # type: ignore[method-assign]
native.NativeLayer.bind_group = _counted("bind-groups", native.NativeLayer.bind_group)  # type: ignore[method-assign]


def inputs() -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in (
        ("a", (70, 50)), ("b", (50, 30)), ("p", (200, 300)), ("q", (300, 150)), ("img", (2, 3, 9, 9)),
        ("ker", (4, 3, 3, 3)), ("mlp_x", (32, 8)), ("mlp_y", (32, 4)), ("w1", (16, 8)), ("w2", (4, 16)))}


def main() -> None:
    x = inputs()
    t = {k: rm.tensor(v, device="wgpu") for k, v in x.items()}
    out: dict[str, Any] = {}
    a = t["a"]
    out["gelu"] = F.gelu(a * 2.0 + 1.0)
    out["where"] = rm.where(a > 0, a, -a * 0.5)
    out["exp_sub"] = rm.exp(a - a.max())
    out["gemm_small"] = a @ t["b"]
    out["gemm_tiled"] = t["p"] @ t["q"]
    out["sum_rows"] = a.sum(dim=1)
    out["mean_cols"] = a.mean(dim=0)
    out["softmax"] = F.softmax(a, dim=1)
    img = rm.tensor(x["img"], device="wgpu", requires_grad=True)
    ker = rm.tensor(x["ker"], device="wgpu", requires_grad=True)
    conv = F.conv2d(img, ker, padding=1)
    (conv * conv).sum().backward()
    out["conv"], out["conv_dx"], out["conv_dw"] = conv, img.grad, ker.grad
    w1 = rm.tensor(x["w1"], device="wgpu", requires_grad=True)
    w2 = rm.tensor(x["w2"], device="wgpu", requires_grad=True)
    opt = rm.optim.SGD([w1, w2], lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(rm.relu(t["mlp_x"] @ w1.T) @ w2.T, t["mlp_y"])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["mlp_loss"], out["mlp_w1"], out["mlp_w2"] = losses, w1, w2
    dev = backend_api.backend("wgpu").device(0)
    result = {k: (v.detach().numpy().tolist() if hasattr(v, "detach") else v) for k, v in out.items()}
    print(json.dumps({"results": result, "used": USED, "described": dev.native.describe(),
                      "raw_passes": dev.recorder._raw is not None, "dispatches": dev.recorder.dispatches}))


if __name__ == "__main__":
    main()

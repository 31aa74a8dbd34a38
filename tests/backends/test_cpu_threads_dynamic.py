"""The kernels whose parallel regions take pieces as threads come free (RUMUS_PARALLEL_FOR_DYNAMIC +
rumus_chunks, issue 11: a busy neighbour on one core must not hold the whole region up): norms, batch norm,
pooling, dropout, embedding rows and their backward, reductions. Each piece is a contiguous range of
independent outputs, so the bits must not depend on the thread count; the values are checked against
float64 references so a test that compares garbage with garbage cannot pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")
torch = pytest.importorskip("torch")

from thread_count_runs import run_at_each_thread_count  # noqa: E402

SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus_cpu import threads
rng = np.random.default_rng(0)
res = {}
def t(a, grad=False):
    x = rm.tensor(np.asarray(a, np.float32))
    return x.requires_grad_() if grad else x
def keep(name, a):
    res[name] = np.asarray(a)
xs = rng.standard_normal((700, 1024)); keep("ln_x", xs)
ln = nn.LayerNorm(1024)
keep("ln_y", ln(t(xs)).numpy())
bx_np = rng.standard_normal((16, 64, 40, 40)); keep("bn_x", bx_np)
bg_np = rng.standard_normal((16, 64, 40, 40)); keep("bn_g", bg_np)
bx = t(bx_np, True)
bn = nn.BatchNorm2d(64)
by = bn(bx)
(by * t(bg_np)).sum().backward()
keep("bn_y", by.numpy()); keep("bn_gx", bx.grad.numpy()); keep("bn_gw", bn.weight.grad.numpy())
keep("bn_rm", bn.running_mean.numpy()); keep("bn_rv", bn.running_var.numpy())
px = t(bx_np, True)
mp = F.max_pool2d(px, 2)
ap = F.avg_pool2d(px, 3, stride=2, padding=1)
(mp.sum() + (ap * ap).sum()).backward()
keep("maxpool", mp.numpy()); keep("avgpool", ap.numpy()); keep("pool_gx", px.grad.numpy())
px3 = t(bx_np, True)
mp3 = F.max_pool2d(px3, 3, stride=2, padding=1)  # the general windows, and a gradient that overlaps
(mp3 * mp3).sum().backward()
keep("maxpool3", mp3.numpy()); keep("maxpool3_gx", px3.grad.numpy())
rm.manual_seed(7)
keep("dropout", F.dropout(t(bx_np), 0.3, training=True).numpy())
emb = nn.Embedding(5000, 256)
ids_np = rng.integers(0, 5000, (64, 128)); keep("ids", ids_np)
ev = emb(rm.tensor(ids_np))
eg_np = rng.standard_normal((64, 128, 256)); keep("emb_g", eg_np)
(ev * t(eg_np)).sum().backward()
keep("emb_w", emb.weight.numpy()); keep("emb_y", ev.numpy()); keep("emb_gw", emb.weight.grad.numpy())
keep("sum_last", t(xs).sum(-1).numpy())
long_np = rng.standard_normal((4, 300000)); keep("long_x", long_np)
keep("sum_long", t(long_np).sum(-1).numpy())
from rumus_cpu import kernels_nn_conv
kernels_nn_conv._fused = lambda *args: False  # conv's im2col path, as where numpy's BLAS is not attached
for name, xs, ws in (("unfold_small", (16, 4, 12, 12), (8, 4, 3, 3)), ("unfold_big", (8, 16, 24, 24), (32, 16, 3, 3))):
    cx_np, cw_np = rng.standard_normal(xs), rng.standard_normal(ws) * 0.1
    cx, cw = t(cx_np, True), t(cw_np, True)
    cy = F.conv2d(cx, cw, padding=1)
    (cy * cy).sum().backward()
    keep(name + "_x", cx_np); keep(name + "_w", cw_np)
    keep(name + "_y", cy.numpy()); keep(name + "_gx", cx.grad.numpy()); keep(name + "_gw", cw.grad.numpy())
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads(), "openmp": threads.policy()["openmp"]}))
"""

OUTPUTS = ("ln_y", "bn_y", "bn_gx", "bn_gw", "bn_rm", "bn_rv", "maxpool", "avgpool", "pool_gx", "maxpool3",
           "maxpool3_gx", "dropout", "emb_y", "emb_gw", "sum_last", "sum_long", "unfold_small_y", "unfold_small_gx",
           "unfold_small_gw", "unfold_big_y", "unfold_big_gx", "unfold_big_gw")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> list[tuple[dict[str, Any], Any]]:
    return run_at_each_thread_count(SCRIPT, tmp_path_factory.mktemp("dynamic_threads"))


def test_chunked_kernels_are_bit_identical_at_1_2_3_4_threads(runs: list[tuple[dict[str, Any], Any]]) -> None:
    if runs[0][0]["openmp"]:
        assert [info["threads"] for info, _ in runs] == [1, 2, 3, 4]
    base = runs[0][1]
    for _, res in runs[1:]:
        for key in OUTPUTS:
            np.testing.assert_array_equal(base[key], res[key], err_msg=key)


def test_chunked_kernels_match_float64_references(runs: list[tuple[dict[str, Any], Any]]) -> None:
    r = runs[-1][1]  # the most pieces
    f32 = lambda a: torch.tensor(np.asarray(a, np.float32), dtype=torch.float64)  # noqa: E731
    tol = {"rtol": 1e-4, "atol": 1e-4}
    ln_ref = torch.nn.functional.layer_norm(f32(r["ln_x"]), (1024,))
    np.testing.assert_allclose(r["ln_y"], ln_ref.numpy(), **tol)
    x = f32(r["bn_x"]).requires_grad_()
    bn = torch.nn.BatchNorm2d(64).double()
    y = bn(x)
    (y * f32(r["bn_g"])).sum().backward()
    np.testing.assert_allclose(r["bn_y"], y.detach().numpy(), **tol)
    np.testing.assert_allclose(r["bn_gx"], x.grad.numpy(), **tol)
    np.testing.assert_allclose(r["bn_gw"], bn.weight.grad.numpy(), rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(r["bn_rm"], bn.running_mean.numpy(), **tol)
    np.testing.assert_allclose(r["bn_rv"], bn.running_var.numpy(), **tol)
    px = f32(r["bn_x"]).requires_grad_()
    mp = torch.nn.functional.max_pool2d(px, 2)
    ap = torch.nn.functional.avg_pool2d(px, 3, stride=2, padding=1)
    (mp.sum() + (ap * ap).sum()).backward()
    np.testing.assert_allclose(r["maxpool"], mp.detach().numpy(), **tol)
    np.testing.assert_allclose(r["avgpool"], ap.detach().numpy(), **tol)
    np.testing.assert_allclose(r["pool_gx"], px.grad.numpy(), **tol)
    px3 = f32(r["bn_x"]).requires_grad_()
    mp3 = torch.nn.functional.max_pool2d(px3, 3, stride=2, padding=1)
    (mp3 * mp3).sum().backward()
    np.testing.assert_allclose(r["maxpool3"], mp3.detach().numpy(), **tol)
    np.testing.assert_allclose(r["maxpool3_gx"], px3.grad.numpy(), **tol)
    drop, src = r["dropout"], np.asarray(r["bn_x"], np.float32)
    kept = drop != 0
    assert 0.65 < kept.mean() < 0.75  # p = 0.3
    np.testing.assert_allclose(drop[kept], src[kept] / np.float32(0.7), rtol=1e-6)
    w, ids = r["emb_w"].astype(np.float64), r["ids"]
    np.testing.assert_array_equal(r["emb_y"], r["emb_w"][ids])
    gw = np.zeros_like(w)
    np.add.at(gw, ids.reshape(-1), np.asarray(r["emb_g"], np.float32).astype(np.float64).reshape(-1, 256))
    np.testing.assert_allclose(r["emb_gw"], gw, **tol)
    np.testing.assert_allclose(r["sum_last"], np.asarray(r["ln_x"], np.float32).astype(np.float64).sum(-1), **tol)
    np.testing.assert_allclose(r["sum_long"], np.asarray(r["long_x"], np.float32).astype(np.float64).sum(-1),
                               rtol=1e-5, atol=1e-3)
    for name in ("unfold_small", "unfold_big"):
        cx, cw = f32(r[name + "_x"]).requires_grad_(), f32(r[name + "_w"]).requires_grad_()
        cy = torch.nn.functional.conv2d(cx, cw, padding=1)
        (cy * cy).sum().backward()
        np.testing.assert_allclose(r[name + "_y"], cy.detach().numpy(), **tol, err_msg=name)
        np.testing.assert_allclose(r[name + "_gx"], cx.grad.numpy(), **tol, err_msg=name)
        np.testing.assert_allclose(r[name + "_gw"], cw.grad.numpy(), rtol=1e-4, atol=1e-2, err_msg=name)

"""The kernels whose parallel loops take pieces as threads come free (the kernels' pool, csrc/pool.c, issue 11:
a busy neighbour on one core must not hold the whole loop up): norms, batch norm, pooling, dropout, embedding
rows and their backward, reductions (each of their three strategies), argmax, softmax backward, cross-entropy,
quantized matmuls (every ISA path this CPU has, and the dequantised panels). Each piece is a contiguous range of
independent outputs, so the bits must not depend on the thread count; the values are checked against
float64 references so a test that compares garbage with garbage cannot pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")
torch = pytest.importorskip("torch")

from thread_count_runs import run_at_each_thread_count  # noqa: E402

# what both scripts start with: a float32 tensor maker and the arrays kept for the parent test
PRELUDE = r"""
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
"""

SCRIPT = PRELUDE + r"""
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
keep("argmax", t(xs).argmax(-1).numpy())
keep("amax0", t(xs).amax(0).numpy())  # columns strategy, blocks narrowed to the thread count
sx_np = rng.standard_normal((400, 700)); keep("sm_x", sx_np)
sg_np = rng.standard_normal((400, 700)); keep("sm_g", sg_np)
sx, lx, cx = t(sx_np, True), t(sx_np, True), t(sx_np, True)
(F.softmax(sx, -1) * t(sg_np)).sum().backward()
(F.log_softmax(lx, 0) * t(sg_np)).sum().backward()  # rows strided across the inner dim
keep("sm_gx", sx.grad.numpy()); keep("lsm0_gx", lx.grad.numpy())
ce_t = rng.integers(0, 700, 400); ce_t[::9] = -100; keep("ce_t", ce_t)
ce_w = rng.random(700) + 0.5; keep("ce_w", ce_w)
ce_g = rng.standard_normal(400); keep("ce_g", ce_g)
ce = F.cross_entropy(cx, rm.tensor(ce_t), weight=t(ce_w), reduction="none", label_smoothing=0.1)
(ce * t(ce_g)).sum().backward()
keep("ce_loss", ce.numpy()); keep("ce_gx", cx.grad.numpy())
from rumus.backend_api import from_storage
from rumus_contracts import int4, q8
from rumus_contracts.ops import quant as Q
from rumus_cpu._lib import lib
from rumus_cpu.kernels_quant import PANEL_MIN_ROWS, force_isa, set_panel_rows
qw = rng.standard_normal((544, 1100)).astype(np.float32); keep("q_w", qw)
qx = rng.standard_normal((20, 544)).astype(np.float32); keep("q_x", qx)
q8w = from_storage(Q.q8_pack(qw, 32), q8(32))
qs, qz = Q.int4_params(qw, 32)
i4w = from_storage(Q.int4_pack_codes(Q.int4_codes(qw, qs, qz, 32), 32), int4(32))
def quant(tag):
    keep("q8_" + tag, rm.ops.q8_linear(rm.tensor(qx), q8w, n=1100).numpy())
    keep("int4_" + tag, rm.ops.int4_linear(rm.tensor(qx), i4w, rm.tensor(qs), rm.tensor(qz)).numpy())
quant("panels")  # 20 rows: float GEMM on dequantised panels where a BLAS is attached
set_panel_rows(1 << 62)
for isa in ("portable", "avx2", "avx512vnni")[: int(lib.rumus_quant_best_isa()) + 1]:
    force_isa(isa)
    quant(isa)
force_isa(None)
set_panel_rows(PANEL_MIN_ROWS)
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
print(json.dumps({"threads": threads.get_num_threads()}))
"""

OUTPUTS = ("ln_y", "bn_y", "bn_gx", "bn_gw", "bn_rm", "bn_rv", "maxpool", "avgpool", "pool_gx", "maxpool3",
           "maxpool3_gx", "dropout", "emb_y", "emb_gw", "sum_last", "sum_long", "argmax", "amax0", "sm_gx", "lsm0_gx",
           "ce_loss", "ce_gx", "unfold_small_y", "unfold_small_gx", "unfold_small_gw", "unfold_big_y", "unfold_big_gx",
           "unfold_big_gw")
QUANT = ("q8_", "int4_")  # one output per path: panels, then each register loop this CPU has


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> list[tuple[dict[str, Any], Any]]:
    return run_at_each_thread_count(SCRIPT, tmp_path_factory.mktemp("dynamic_threads"))


def test_chunked_kernels_are_bit_identical_at_1_2_3_4_threads(runs: list[tuple[dict[str, Any], Any]]) -> None:
    assert [info["threads"] for info, _ in runs] == [1, 2, 3, 4]
    base = runs[0][1]
    quant = [key for key in base.files if key.startswith(QUANT)]
    assert len(quant) >= 4  # panels and the portable loop at least, for both schemes
    for _, res in runs[1:]:
        for key in (*OUTPUTS, *quant):
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


def test_rows_kernels_and_quantized_matmuls_match_float64_references(runs: list[tuple[dict[str, Any], Any]]) -> None:
    r = runs[-1][1]
    f32 = lambda a: torch.tensor(np.asarray(a, np.float32), dtype=torch.float64)  # noqa: E731
    tol = {"rtol": 1e-4, "atol": 1e-5}
    xs = np.asarray(r["ln_x"], np.float32)
    np.testing.assert_array_equal(r["argmax"], xs.argmax(-1))
    np.testing.assert_array_equal(r["amax0"], xs.max(0))
    g = f32(r["sm_g"])
    sx, lx, cx = (f32(r["sm_x"]).requires_grad_() for _ in range(3))
    (torch.softmax(sx, -1) * g).sum().backward()
    (torch.log_softmax(lx, 0) * g).sum().backward()
    np.testing.assert_allclose(r["sm_gx"], sx.grad.numpy(), **tol)
    np.testing.assert_allclose(r["lsm0_gx"], lx.grad.numpy(), **tol)
    ce = torch.nn.functional.cross_entropy(cx, torch.tensor(r["ce_t"]), weight=f32(r["ce_w"]), reduction="none",
                                           label_smoothing=0.1)
    (ce * f32(r["ce_g"])).sum().backward()
    assert (r["ce_t"] == -100).any() and (r["ce_loss"][r["ce_t"] == -100] == 0).all()
    np.testing.assert_allclose(r["ce_loss"], ce.detach().numpy(), **tol)
    np.testing.assert_allclose(r["ce_gx"], cx.grad.numpy(), **tol)
    from rumus_contracts.ops import quant as layout
    w, x = r["q_w"], r["q_x"].astype(np.float64)
    q8_want = x @ layout.q8_unpack(layout.q8_pack(w, 32), 544, 1100, 32).astype(np.float64)
    s, z = layout.int4_params(w, 32)
    int4_want = x @ layout.int4_dequant(layout.int4_codes(w, s, z, 32), s, z, 32).astype(np.float64)
    for key in r.files:
        if key.startswith(QUANT):
            want = q8_want if key.startswith("q8_") else int4_want
            # float32 sums of 544 products: error like sqrt(k) ulps of the largest result (tests/quant)
            np.testing.assert_allclose(r[key], want, rtol=0, atol=2e-6 * np.sqrt(544) * np.abs(want).max(),
                                       err_msg=key)


# The norms on the kernels' pool (csrc/internal/nn_norm_impl.h), each above the 2M-element bound under which a
# norm stays on one thread: layer and RMS norm forward and backward (rows, weight/bias sums per partition of
# the rows), group norm forward and backward, batch norm statistics, forward (training and eval) and backward.
NORM_SCRIPT = PRELUDE + r"""
def run(prefix, fn, x_np, params):
    x, ps = t(x_np, True), [t(p, True) for p in params]
    g = rng.standard_normal(x_np.shape); keep(prefix + "_g", g)
    y = fn(x, *ps)
    (y * t(g)).sum().backward()
    keep(prefix + "_y", y.numpy()); keep(prefix + "_gx", x.grad.numpy())
    for i, p in enumerate(ps):
        keep(f"{prefix}_gp{i}", p.grad.numpy())
rows = rng.standard_normal((2100, 1024)); keep("rows", rows)
w, b = rng.standard_normal(1024), rng.standard_normal(1024); keep("w", w); keep("b", b)
run("ln", lambda x, w, b: F.layer_norm(x, (1024,), w, b), rows, [w, b])
run("rms", lambda x, w: F.rms_norm(x, (1024,), w, 1e-6), rows, [w])
img = rng.standard_normal((8, 32, 96, 96)) * 3 + 1; keep("img", img)
cw, cb = rng.standard_normal(32), rng.standard_normal(32); keep("cw", cw); keep("cb", cb)
run("gn", lambda x, w, b: F.group_norm(x, 4, w, b), img, [cw, cb])
rmean, rvar = t(np.zeros(32)), t(np.ones(32))
run("bn", lambda x, w, b: F.batch_norm(x, rmean, rvar, w, b, training=True), img, [cw, cb])
keep("bn_rm", rmean.numpy()); keep("bn_rv", rvar.numpy())
run("bn_eval", lambda x, w, b: F.batch_norm(x, rmean, rvar, w, b, training=False), img, [cw, cb])
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads()}))
"""

NORM_OUTPUTS = ("ln_y", "ln_gx", "ln_gp0", "ln_gp1", "rms_y", "rms_gx", "rms_gp0", "gn_y", "gn_gx", "gn_gp0", "gn_gp1",
                "bn_y", "bn_gx", "bn_gp0", "bn_gp1", "bn_rm", "bn_rv", "bn_eval_y", "bn_eval_gx", "bn_eval_gp0",
                "bn_eval_gp1")


@pytest.fixture(scope="module")
def norm_runs(tmp_path_factory: Any) -> list[tuple[dict[str, Any], Any]]:
    return run_at_each_thread_count(NORM_SCRIPT, tmp_path_factory.mktemp("norm_threads"))


def test_norms_are_bit_identical_at_1_2_3_4_threads(norm_runs: list[tuple[dict[str, Any], Any]]) -> None:
    assert [info["threads"] for info, _ in norm_runs] == [1, 2, 3, 4]
    base = norm_runs[0][1]
    for _, res in norm_runs[1:]:
        for key in NORM_OUTPUTS:
            np.testing.assert_array_equal(base[key], res[key], err_msg=key)


def _torch_grads(fn: Any, x: Any, params: list[Any], g: Any) -> list[Any]:
    """[y, dx, dparams...] of fn in float64 torch, for the upstream gradient g."""
    f64 = lambda a: torch.tensor(np.asarray(a, np.float32), dtype=torch.float64)  # noqa: E731
    xt, ps = f64(x).requires_grad_(), [f64(p).requires_grad_() for p in params]
    y = fn(xt, *ps)
    (y * f64(g)).sum().backward()
    return [y.detach().numpy(), xt.grad.numpy(), *(p.grad.numpy() for p in ps)]


def test_norms_match_float64_references(norm_runs: list[tuple[dict[str, Any], Any]]) -> None:
    r = norm_runs[-1][1]  # the most pieces
    tf = torch.nn.functional
    rm64, rv64 = torch.zeros(32, dtype=torch.float64), torch.ones(32, dtype=torch.float64)
    cases = {
        "ln": (lambda x, w, b: tf.layer_norm(x, (1024,), w, b), "rows", ["w", "b"]),
        "rms": (lambda x, w: tf.rms_norm(x, (1024,), w, 1e-6), "rows", ["w"]),
        "gn": (lambda x, w, b: tf.group_norm(x, 4, w, b), "img", ["cw", "cb"]),
        "bn": (lambda x, w, b: tf.batch_norm(x, rm64, rv64, w, b, training=True), "img", ["cw", "cb"]),
        "bn_eval": (lambda x, w, b: tf.batch_norm(x, rm64, rv64, w, b, training=False), "img", ["cw", "cb"]),
    }
    for prefix, (fn, x, params) in cases.items():
        want = _torch_grads(fn, r[x], [r[p] for p in params], r[prefix + "_g"])
        names = ["_y", "_gx"] + [f"_gp{i}" for i in range(len(params))]
        for name, w in zip(names, want):
            # weight/bias gradients sum ~10^5-10^6 float32 products: relative to their size
            tol = {"rtol": 1e-4, "atol": 1e-4} if name in ("_y", "_gx") else {"rtol": 1e-4, "atol": 2e-2}
            np.testing.assert_allclose(r[prefix + name], w, err_msg=prefix + name, **tol)
        if prefix == "bn":
            np.testing.assert_allclose(r["bn_rm"], rm64.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(r["bn_rv"], rv64.numpy(), rtol=1e-5, atol=1e-6)

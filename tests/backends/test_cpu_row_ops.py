"""The row ops rendered from the row-op table (rumus_contracts/ops/row_ops.py) on the CPU: every layout
against float64 numpy, gradients against finite differences, and the same bits at every thread count."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402
from rumus_contracts.ops.expr_lang import Unsupported  # noqa: E402
from rumus_contracts.ops.row_c import render_rows  # noqa: E402
from rumus_contracts.ops.row_ops import ROW_OPS  # noqa: E402
from rumus_contracts.ops.row_wgsl import row_shader  # noqa: E402

from thread_count_runs import run_at_each_thread_count  # noqa: E402



def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return np.asarray(e / e.sum(axis=dim, keepdims=True))


def _log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    s = x - x.max(axis=dim, keepdims=True)
    return np.asarray(s - np.log(np.exp(s).sum(axis=dim, keepdims=True)))


def test_every_row_op_renders() -> None:
    src = render_rows()
    for name in ROW_OPS:
        assert f'"{name}_f32"' in src and f"rf_{name}(" in src
    # WGSL: the ops whose passes the row shader holds (at least these; the others raise Unsupported)
    assert {n for n in ROW_OPS if _wgsl_renders(n)} >= {"softmax", "log_softmax", "softmax_backward",
                                                        "log_softmax_backward", "layer_norm", "rms_norm"}


def _wgsl_renders(name: str) -> bool:
    try:
        return row_shader(name).kind in ("online", "sum")
    except Unsupported:
        return False


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("cols", [1, 7, 64, 1000])
def test_norms_match_float64(dtype: str, cols: int) -> None:
    rng = np.random.default_rng(5)
    x64 = rng.standard_normal((9, cols)) * 3 + 5  # offset data: the centred second pass matters
    w64, b64 = rng.standard_normal(cols), rng.standard_normal(cols)
    x, w, b = (rm.tensor(a.astype(np.float32)).to(getattr(rm, dtype)) for a in (x64, w64, b64))
    x64, w64, b64 = (t.double().numpy() for t in (x, w, b))  # the stored values, exactly
    tol = {"float32": 1e-6, "float64": 1e-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    mean, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-5) * w64 + b64
    np.testing.assert_allclose(F.layer_norm(x, (cols,), w, b).double().numpy(), want, rtol=tol, atol=tol * 4)
    want = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-6) * w64
    np.testing.assert_allclose(F.rms_norm(x, (cols,), w, eps=1e-6).double().numpy(), want, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["contiguous", "short", "strided dim", "transposed", "offset view"])
def test_forward_matches_float64(dtype: str, case: str) -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal((6, 70, 5)) * 4
    base[0, 3, 0] = -np.inf  # an -inf logit gives 0 / -inf
    t = rm.tensor(base.astype(dtype))
    views = {"contiguous": (t[:, :, 0].contiguous(), base[:, :, 0], 1),
             "short": (t[:, :7, 0].contiguous(), base[:, :7, 0], 1),
             "strided dim": (t, base, 1),
             "transposed": (t.transpose(0, 2), base.transpose(2, 1, 0), 2),
             "offset view": (t[1:, 1:, 2], base[1:, 1:, 2], 1)}
    x, ref, dim = views[case]
    tol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(F.softmax(x, dim=dim).numpy(), _softmax(ref, dim), rtol=tol, atol=tol)
    np.testing.assert_allclose(F.log_softmax(x, dim=dim).numpy(), _log_softmax(ref, dim), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((3, 40), 1), ((4, 5, 3), 1), ((4, 17), 0)])
def test_gradient_matches_finite_differences(op: str, shape: tuple[int, ...], dim: int) -> None:
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal(shape)
    g = rng.standard_normal(shape)
    ref = {"softmax": _softmax, "log_softmax": _log_softmax}[op]
    x = rm.tensor(x0).requires_grad_(True)
    (getattr(F, op)(x, dim=dim) * rm.tensor(g)).sum().backward()
    num = np.zeros_like(x0)
    h = 1e-6
    for i in np.ndindex(shape):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += h
        xm[i] -= h
        num[i] = ((ref(xp, dim) - ref(xm, dim)) * g).sum() / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype, ulp", [("float16", 2.0**-10), ("bfloat16", 2.0**-7)])
def test_half_rows_round_once(dtype: str, ulp: float) -> None:
    x = rm.tensor(np.random.default_rng(3).standard_normal((8, 300)).astype(np.float32)).to(getattr(rm, dtype))
    ref = _softmax(x.float().numpy().astype(np.float64), 1)
    # computed in double, rounded once: within half an ulp of the exact result (one ulp allowed)
    np.testing.assert_allclose(F.softmax(x, dim=1).float().numpy(), ref, rtol=ulp, atol=0)


_SCRIPT = """
import json, sys
import numpy as np
import rumus as rm
from rumus.nn import functional as F
rng = np.random.default_rng(4)
out = {}
for op in ("softmax", "log_softmax"):
    for shape, dim in (((512, 300), 1), ((64, 33, 40), 1), ((4096, 40), 1)):
        x = rm.tensor(rng.standard_normal(shape).astype(np.float32)).requires_grad_(True)
        y = getattr(F, op)(x, dim=dim)
        y.backward(rm.tensor(rng.standard_normal(shape).astype(np.float32)))
        out[f"{op}{shape}"] = y.detach().numpy()
        out[f"{op}{shape}grad"] = x.grad.numpy()
for rows, cols in ((4096, 64), (600, 4000)):
    x = rm.tensor(rng.standard_normal((rows, cols)).astype(np.float32))
    w, b = (rm.tensor(rng.standard_normal(cols).astype(np.float32)) for _ in range(2))
    out[f"layer_norm{rows}"] = F.layer_norm(x, (cols,), w, b).numpy()
    out[f"rms_norm{rows}"] = F.rms_norm(x, (cols,), w).numpy()
    g = rm.tensor(rng.standard_normal((rows, cols)).astype(np.float32))
    for op in ("layer_norm", "rms_norm"):
        xg, wg, bg = (t.detach().requires_grad_(True) for t in (x, w, b))
        y = F.layer_norm(xg, (cols,), wg, bg) if op == "layer_norm" else F.rms_norm(xg, (cols,), wg)
        y.backward(g)
        for name, t in (("x", xg), ("w", wg), ("b", bg)):
            if t.grad is not None:
                out[f"{op}{rows}d{name}"] = t.grad.numpy()
    out[f"logsumexp{rows}"] = rm.logsumexp(x, 1).numpy()
    target = rng.integers(0, cols, rows)
    target[::5] = -100
    for kw in ({}, {"weight": w.abs(), "label_smoothing": 0.1}):
        xg = x.detach().requires_grad_(True)
        loss = F.cross_entropy(xg, rm.tensor(target), reduction="none", **kw)
        loss.backward(rm.tensor(rng.standard_normal(rows).astype(np.float32)))
        out[f"cross_entropy{rows}{len(kw)}"] = loss.detach().numpy()
        out[f"cross_entropy{rows}{len(kw)}grad"] = xg.grad.numpy()
for shape, groups in (((16, 64, 48, 48), 8), ((130, 6, 5, 5), 3)):  # above the serial bound; many partitions
    x = rm.tensor(rng.standard_normal(shape).astype(np.float32)).requires_grad_(True)
    w, b = (rm.tensor(rng.standard_normal(shape[1]).astype(np.float32)).requires_grad_(True) for _ in range(2))
    y = F.group_norm(x, groups, w, b)
    y.backward(rm.tensor(rng.standard_normal(shape).astype(np.float32)))
    out[f"group_norm{shape}"] = y.detach().numpy()
    for name, t in (("x", x), ("w", w), ("b", b)):
        out[f"group_norm{shape}d{name}"] = t.grad.numpy()
np.savez(sys.argv[1], **out)
print(json.dumps({}))
"""


def test_same_bits_at_every_thread_count(tmp_path: Path) -> None:
    runs = run_at_each_thread_count(_SCRIPT, tmp_path)
    first = runs[0][1]
    for _, arrays in runs[1:]:
        for key in first.files:
            np.testing.assert_array_equal(arrays[key], first[key], err_msg=key)


def _lse(x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.asarray(np.log(np.exp(x - m).sum(axis=dims, keepdims=True)) + m)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", ["rows", "strided dim", "two dims that merge", "two dims that do not merge",
                                  "no dims", "transposed view", "infinities"])
def test_logsumexp_matches_float64(dtype: str, case: str) -> None:
    rng = np.random.default_rng(6)
    base = rng.standard_normal((5, 40, 6)) * 4
    x = rm.tensor(base.astype(np.float32)).to(getattr(rm, dtype))
    ref = x.double().numpy()  # the stored values, exactly
    inf = np.array([[np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [np.nan, 0.0, 1.0], [np.inf, -np.inf, 0.0],
                    [-np.inf, 2.0, 1.0]])
    views = {"rows": (x[:, :, 0].contiguous(), ref[:, :, 0], (1,)),
             "strided dim": (x, ref, (1,)),
             "two dims that merge": (x, ref, (1, 2)),
             "two dims that do not merge": (x, ref, (0, 2)),
             "no dims": (x, ref, ()),
             "transposed view": (x.transpose(0, 2), ref.transpose(2, 1, 0), (1,)),
             "infinities": (rm.tensor(inf.astype(np.float32)).to(getattr(rm, dtype)), inf, (1,))}
    t, r, dims = views[case]
    want = r.copy() if not dims else _lse(r, dims)
    got = rm.logsumexp(t, dims, keepdim=True).double().numpy()
    tol = {"float32": 1e-6, "float64": 1e-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_logsumexp_of_empty_rows_is_minus_infinity() -> None:
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        got = rm.logsumexp(rm.tensor(np.zeros((3, 0), np.float32)).to(getattr(rm, dtype)), 1).double().numpy()
        np.testing.assert_array_equal(got, np.full(3, -np.inf))
    assert rm.logsumexp(rm.tensor(np.zeros((0, 4), np.float32)), 1).shape == (0,)


@pytest.mark.parametrize("shape, dims", [((3, 40), (1,)), ((4, 5, 3), (0, 2)), ((4, 17), (0,))])
def test_logsumexp_gradient_matches_finite_differences(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    x0, g = rng.standard_normal(shape), rng.standard_normal(_lse(np.zeros(shape), dims).shape)
    x = rm.tensor(x0).requires_grad_(True)
    (rm.logsumexp(x, dims, keepdim=True) * rm.tensor(g)).sum().backward()
    num = np.zeros_like(x0)
    h = 1e-6
    for i in np.ndindex(shape):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += h
        xm[i] -= h
        num[i] = ((_lse(xp, dims) - _lse(xm, dims)) * g).sum() / (2 * h)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("rows, cols", [(5, 7), (70, 3), (1, 33)])
def test_norm_gradients_match_finite_differences(op: str, rows: int, cols: int) -> None:
    rng = np.random.default_rng(8)
    x0, w0, b0 = rng.standard_normal((rows, cols)) * 2 + 3, rng.standard_normal(cols), rng.standard_normal(cols)
    g = rng.standard_normal((rows, cols))

    def f(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> float:
        if op == "layer_norm":
            y = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b
        else:
            y = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * w
        return float((y * g).sum())

    x, w, b = (rm.tensor(a).requires_grad_(True) for a in (x0, w0, b0))
    y = F.layer_norm(x, (cols,), w, b) if op == "layer_norm" else F.rms_norm(x, (cols,), w, eps=1e-6)
    (y * rm.tensor(g)).sum().backward()
    args = [x0, w0, b0]
    for k, t in enumerate((x, w, b) if op == "layer_norm" else (x, w)):
        num = np.zeros_like(args[k])
        for i in np.ndindex(args[k].shape):
            p, m = [a.copy() for a in args], [a.copy() for a in args]
            p[k][i] += 1e-6
            m[k][i] -= 1e-6
            num[i] = (f(*p) - f(*m)) / 2e-6
        np.testing.assert_allclose(t.grad.numpy(), num, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_with_masked_classes_stays_finite(dtype: str) -> None:
    # -inf logits (masked classes) give a finite loss without label smoothing: no 0 * inf term
    x0 = np.random.default_rng(9).standard_normal((6, 40))
    x0[:, ::3] = -np.inf
    t = np.arange(6) * 3 + 1
    t[2] = -100
    x = rm.tensor(x0.astype(dtype)).requires_grad_(True)
    loss = F.cross_entropy(x, rm.tensor(t), reduction="none")
    loss.backward(rm.tensor(np.ones(6, dtype)))
    import torch
    tx = torch.tensor(x0, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t), reduction="none")
    tl.backward(torch.ones(6, dtype=torch.float64))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(loss.detach().numpy(), tl.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)

"""layer_norm / rms_norm backward on wgpu: gx from a row op of the row-op table (rendered into
shaders/softmax.wgsl; row_wgsl.NORM_DX until the table holds the backward entries), which also keeps each
row's (mean, rstd), then the weight / bias gradients as column sums folded in a fixed order. Values
against PyTorch float64 for every row length class (vec4 rows, odd ones, one invocation per row, many
row blocks), the dispatch count, float16, unaligned offsets, the workgroup-memory merge, same bits on
every run."""

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.nn import functional as F
from rumus_contracts.ops.row_ops import ROW_OPS
from rumus_contracts.ops.row_wgsl import NORM_DX, row_shader
from rumus_wgpu.nn_norm import dx_op
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(11)


def _run(kind: str, x: np.ndarray, g: np.ndarray, dtype: str = "float32", bias: bool = True):
    n = x.shape[-1]
    w, b = RNG.uniform(0.5, 1.5, n), RNG.uniform(-1, 1, n)
    xr = rm.tensor(x, dtype=dtype, device=DEVICE, requires_grad=True)
    wr = rm.tensor(w, dtype=dtype, device=DEVICE, requires_grad=True)
    br = rm.tensor(b, dtype=dtype, device=DEVICE, requires_grad=True) if bias else None
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    if kind == "layer_norm":
        yr, yt = F.layer_norm(xr, (n,), wr, br), torch.nn.functional.layer_norm(xt, (n,), wt, bt if bias else None)
    else:
        yr, yt = F.rms_norm(xr, (n,), wr, eps=1e-6), torch.nn.functional.rms_norm(xt, (n,), wt, eps=1e-6)
    yr.backward(rm.tensor(g, dtype=dtype, device=DEVICE))
    yt.backward(torch.tensor(g))
    got = [yr.numpy(), xr.grad.numpy(), wr.grad.numpy()]
    want = [yt.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    if bias and kind == "layer_norm":
        got.append(br.grad.numpy())
        want.append(bt.grad.numpy())
    return got, want


def _close(got, want, rows, tol=2e-4):
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b, rtol=tol, atol=tol * np.sqrt(rows) * 4)


def test_gx_comes_from_a_row_op():
    # the table's entry where it holds one of this shape, else NORM_DX's; either renders to the row shader
    for name in ("layer_norm_backward", "rms_norm_backward", "group_norm_backward"):
        op = dx_op(name)
        assert op is ROW_OPS.get(name) or op is NORM_DX[name]  # the table entry where WGSL renders it
        assert len(op.inputs) == 2 and len(op.columns) == 1 and row_shader(op).walks


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [(1, 4), (5, 8), (3, 12), (17, 64), (9, 768), (6, 1024), (4, 1028), (3, 8192)])
def test_values_match_torch_float64(kind, shape):
    x = RNG.standard_normal(shape) * 3 + 2
    got, want = _run(kind, x, RNG.standard_normal(shape))
    _close(got, want, shape[0])


def test_backward_is_three_dispatches():
    # gx and the row statistics (one row op), the column partials, their fixed-order fold
    x = rm.tensor(RNG.standard_normal((64, 256)), dtype="float32", device=DEVICE, requires_grad=True)
    w = rm.tensor(np.ones(256), dtype="float32", device=DEVICE, requires_grad=True)
    b = rm.tensor(np.zeros(256), dtype="float32", device=DEVICE, requires_grad=True)
    g = rm.tensor(RNG.standard_normal((64, 256)), dtype="float32", device=DEVICE)
    y = F.layer_norm(x, (256,), w, b)
    rm.synchronize(DEVICE)
    before = BACKEND.stats(rm.Device.parse(DEVICE))["dispatches"]
    y.backward(g)
    rm.synchronize(DEVICE)
    assert BACKEND.stats(rm.Device.parse(DEVICE))["dispatches"] - before == 3
    assert x.grad is not None and w.grad is not None and b.grad is not None


@pytest.mark.parametrize("shape", [(300_001, 8), (70_001, 20)])
def test_many_row_blocks_per_workgroup(shape):
    # 8 columns: one invocation per row (two vec4 loads), 256 rows per workgroup, over a thousand workgroups;
    # 20 columns: five vec4s over two invocations (three and two loads: the remainder loop)
    got, want = _run("layer_norm", RNG.standard_normal(shape), RNG.standard_normal(shape))
    _close(got, want, shape[0])


def test_float16_rows():
    shape = (33, 512)
    x = RNG.standard_normal(shape)
    got, want = _run("layer_norm", x, RNG.standard_normal(shape), dtype="float16")
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b, rtol=2e-2, atol=2e-2)
    for a, b in zip(got[2:], want[2:]):  # sums over 33 rows of float16 inputs
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b, rtol=2e-2, atol=0.1)


def test_unaligned_offset_takes_the_general_kernels():
    base = RNG.standard_normal((7, 65))
    xr = rm.tensor(base, dtype="float32", device=DEVICE)[:, 1:]  # offset 1: no vec4 view of the rows
    w = rm.tensor(np.ones(64), dtype="float32", device=DEVICE)
    got = F.layer_norm(xr, (64,), w).numpy()
    want = torch.nn.functional.layer_norm(torch.tensor(base[:, 1:]), (64,)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_same_bits_on_every_run():
    shape = (2048, 256)
    x = rm.tensor(RNG.standard_normal(shape), dtype="float32", device=DEVICE, requires_grad=True)
    w = rm.tensor(RNG.uniform(0.5, 1.5, 256), dtype="float32", device=DEVICE, requires_grad=True)
    b = rm.tensor(np.zeros(256), dtype="float32", device=DEVICE, requires_grad=True)
    g = rm.tensor(RNG.standard_normal(shape), dtype="float32", device=DEVICE)
    runs = []
    for _ in range(3):
        x.grad = w.grad = b.grad = None
        F.layer_norm(x, (256,), w, b).backward(g)
        runs.append([t.grad.numpy().tobytes() for t in (x, w, b)])
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("shape", [(9, 768), (70, 20), (3, 8192)])
def test_workgroup_merge_build(shape, monkeypatch):
    # the row sums through workgroup memory (RUMUS_WGPU_NO_SUBGROUPS=1, or an adapter without subgroups)
    monkeypatch.setenv("RUMUS_WGPU_NO_SUBGROUPS", "1")
    got, want = _run("layer_norm", RNG.standard_normal(shape) * 2, RNG.standard_normal(shape))
    _close(got, want, shape[0])

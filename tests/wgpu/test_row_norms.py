"""layer_norm / rms_norm forward on wgpu as row ops of the row-op table (rumus_contracts/ops/row_ops.py,
rendered by row_wgsl.py into shaders/softmax.wgsl): values against PyTorch float64 for every load path
(vec4 rows, scalar rows whose folds read the aligned body as vec4, short and one-element rows, weights at
an unaligned offset, many rows, long rows: layer norm's two walks never split, RMS norm's one walk does),
under the workgroup-memory merge and scalar loads, float16, the dispatch count, the gradients against
finite differences, the generated WGSL's barriers in uniform control flow (Tint rejects others), and an
entry with a field the renderer does not know refused, not rendered without it."""

import dataclasses
import re

import numpy as np
import pytest
import torch

import rumus as rm
from rumus.nn import functional as F
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.row_ops import ROW_OPS, RowOp
from rumus_contracts.ops.row_wgsl import row_shader
from rumus_wgpu.softmax import softmax_source
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(37)
SHAPES = [(37, 5), (4, 1), (9, 768), (5, 1001), (3, 4096), (2, 3, 20), (300, 40), (2, 70_000)]


def _want(kind: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xt, wt, bt = (torch.from_numpy(a) for a in (x, w, b))
    n = w.shape
    if kind == "layer_norm":
        return torch.nn.functional.layer_norm(xt, n, wt, bt, eps=1e-5).numpy()
    return torch.nn.functional.rms_norm(xt, n, wt, eps=1e-6).numpy()


def _got(kind: str, x: rm.Tensor, w: rm.Tensor, b: rm.Tensor) -> np.ndarray:
    n = tuple(w.shape)
    y = F.layer_norm(x, n, w, b) if kind == "layer_norm" else F.rms_norm(x, n, w, eps=1e-6)
    return y.to(rm.float32).numpy().astype(np.float64)


def _case(kind: str, shape: tuple[int, ...], dtype: str = "float32", tol: float = 2e-6) -> None:
    x = RNG.standard_normal(shape) * 3 + 4  # offset data: the centred second walk matters
    w, b = RNG.uniform(0.5, 1.5, shape[-1:]), RNG.uniform(-1, 1, shape[-1:])
    xr, wr, br = (rm.tensor(a.astype(np.float32), device=DEVICE).to(getattr(rm, dtype)) for a in (x, w, b))
    x, w, b = (t.to(rm.float32).numpy().astype(np.float64) for t in (xr, wr, br))  # the stored values
    np.testing.assert_allclose(_got(kind, xr, wr, br), _want(kind, x, w, b), rtol=tol, atol=tol * 4,
                               err_msg=f"{kind} {shape} {dtype}")


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("env", [{}, {"RUMUS_WGPU_NO_SUBGROUPS": "1"}, {"RUMUS_WGPU_NOVEC": "1"}],
                         ids=["default", "workgroup merge", "scalar loads"])
def test_every_path_matches_float64(kind, env, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for shape in SHAPES:
        _case(kind, shape)
    # a normalized shape of two dims: the rows are the trailing 20 elements
    x = RNG.standard_normal((3, 4, 5)) * 2
    w, b = RNG.uniform(0.5, 1.5, (4, 5)), RNG.uniform(-1, 1, (4, 5))
    got = _got(kind, *(rm.tensor(a.astype(np.float32), device=DEVICE) for a in (x, w, b)))
    want = _want(kind, *(a.astype(np.float32).astype(np.float64) for a in (x, w, b)))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=8e-6)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_offsets_of_x_and_the_weights(kind):
    # x from an offset of one element (no vec4 view of its rows), w and b at odd offsets of a bigger buffer
    n = 256
    xs = RNG.standard_normal((7 * n + 1,)) * 2
    ws, bs = RNG.uniform(0.5, 1.5, n + 3), RNG.uniform(-1, 1, n + 5)
    xr, wr, br = (rm.tensor(a.astype(np.float32), device=DEVICE) for a in (xs, ws, bs))
    got = _got(kind, xr[1:].reshape(7, n), wr[3:], br[5:])
    x, w, b = (a.astype(np.float32).astype(np.float64) for a in (xs[1:].reshape(7, n), ws[3:], bs[5:]))
    np.testing.assert_allclose(got, _want(kind, x, w, b), rtol=2e-6, atol=8e-6)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_float16(kind):
    if not BACKEND.device(0).has_f16:
        pytest.skip("this adapter has no shader-f16")
    for shape in [(37, 5), (9, 768), (5, 1001)]:
        _case(kind, shape, "float16", tol=2e-3)  # rounded to float16: half an ulp of values up to ~4


@pytest.mark.parametrize(("kind", "shape", "dispatches"), [
    ("layer_norm", (64, 1024), 1), ("rms_norm", (64, 1024), 1),
    # a long row among few: RMS norm's one walk splits (partial + final), layer norm's two walks do not
    ("layer_norm", (2, 1 << 18), 1), ("rms_norm", (2, 1 << 18), 2)])
def test_dispatches(kind, shape, dispatches):
    x = rm.tensor(RNG.standard_normal(shape).astype(np.float32), device=DEVICE)
    w, b = (rm.tensor(np.full(shape[1], v, np.float32), device=DEVICE) for v in (1.0, 0.0))
    BACKEND.flush(0)
    before = BACKEND.stats(0)["dispatches"]
    y = F.layer_norm(x, (shape[1],), w, b) if kind == "layer_norm" else F.rms_norm(x, (shape[1],), w, eps=1e-6)
    BACKEND.flush(0)
    assert BACKEND.stats(0)["dispatches"] - before == dispatches
    xn = x.numpy().astype(np.float64)
    want = _want(kind, xn, np.ones(shape[1]), np.zeros(shape[1]))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_gradients_match_finite_differences(kind):
    # central differences of the wgpu forward (float32: h large enough that rounding stays small) against
    # the autograd gradients of x, weight and bias through the backward op
    shape, h = (3, 12), 1e-2
    x0, w0, b0 = RNG.standard_normal(shape), RNG.uniform(0.5, 1.5, 12), RNG.uniform(-1, 1, 12)
    r = rm.tensor(RNG.standard_normal(shape).astype(np.float32), device=DEVICE)

    def loss(x: np.ndarray, w: np.ndarray, b: np.ndarray, grad: bool = False):
        ts = [rm.tensor(a.astype(np.float32), device=DEVICE, requires_grad=grad) for a in (x, w, b)]
        y = (F.layer_norm(ts[0], (12,), ts[1], ts[2]) if kind == "layer_norm"
             else F.rms_norm(ts[0], (12,), ts[1], eps=1e-6))
        out = (y * r).sum()
        if grad:
            out.backward()
        return out, ts
    _, ts = loss(x0, w0, b0, grad=True)
    params = (x0, w0, b0) if kind == "layer_norm" else (x0, w0)
    for i, a in enumerate(params):
        got = ts[i].grad.numpy().astype(np.float64)
        fd = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            up, down = [p.copy() for p in (x0, w0, b0)], [p.copy() for p in (x0, w0, b0)]
            up[i][j] += h
            down[i][j] -= h
            fd[j] = (float(loss(*up)[0].numpy()) - float(loss(*down)[0].numpy())) / (2 * h)
        np.testing.assert_allclose(got, fd, rtol=2e-2, atol=2e-3, err_msg=f"{kind} d{('x', 'w', 'b')[i]}")


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize(("vec", "aligned"), [(True, False), (False, True), (False, False)])
@pytest.mark.parametrize("subgroups", [True, False])
def test_barriers_sit_in_uniform_control_flow(kind, vec, aligned, subgroups):
    # every workgroupBarrier of main at its top level (no per-lane loop or branch around it), no inf/NaN
    # constants: Dawn's Tint rejects both, naga accepts them
    src = softmax_source(kind, "f32", vec, "single", subgroups, 4, aligned)
    main = src[src.index("fn main("):]
    barriers = [line for line in main.splitlines() if "workgroupBarrier" in line]
    assert len(barriers) == (1 if kind == "layer_norm" else 0)  # between layer norm's two walks
    assert all(re.fullmatch(r" {4}workgroupBarrier\(\);", line) for line in barriers)
    assert not re.search(r"\binf\b|\bnan\b|/ 0\.0\b", main, re.IGNORECASE)


def test_an_entry_with_a_field_the_renderer_does_not_know_is_not_claimed():
    # a later field of the table (a row-shaped output, say) set on an entry: Unsupported, not dropped
    @dataclasses.dataclass(frozen=True)
    class Wider(RowOp):
        unknown_field: bool = False

    base = ROW_OPS["softmax"]
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(RowOp)}
    assert row_shader(Wider(**fields)).kind == "online"
    with pytest.raises(Unsupported, match="unknown_field"):
        row_shader(Wider(**fields, unknown_field=True))

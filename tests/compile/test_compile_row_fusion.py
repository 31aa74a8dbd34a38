"""Elementwise chains fused into row ops: `softmax(q @ k.T * scale + mask)`, `log_softmax(x / t)`,
`layer_norm(x + residual)`, `rms_norm(x + residual)` become one kernel each, whose results are the
unfused pair's (bit for bit on the CPU, whose fused rows run the prebuilt row function over the chain's
float values; within float32 rounding on WebGPU, whose fused shader folds the row in its own order),
against eager and a float64 reference, with gradients through the compiled step as eager's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus.compile import program as compiled_program
from rumus.nn import functional as F

Fn = Callable[..., Any]


def _kernels(f: Any) -> list[str]:
    """The kernels of f's program, which has run as a replay (not only captured)."""
    assert f.replays >= 1, "the compiled function never replayed"
    program = next(reversed(f._cache.values())).program
    assert program is not None
    return [s.label.split("(")[0] for s in program.items if isinstance(s, compiled_program.Step)]


def _same(got: rm.Tensor, want: rm.Tensor, device: str, rtol: float = 1e-6) -> None:
    if device == "cpu":
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    else:  # WebGPU folds the fused row in another order than its unfused row kernel
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=1e-6)


def _attention(q: rm.Tensor, k: rm.Tensor, mask: rm.Tensor) -> rm.Tensor:
    return rm.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, dim=-1)


@pytest.fixture
def device(device: str) -> str:
    """The compile tests' devices whose backend fuses chains into row ops."""
    if not hasattr(rm.zeros(1, device=device)._storage.backend, "compile_fused_row"):
        pytest.skip(f"{device}: no compile_fused_row")
    return device


def _strided(x: rm.Tensor, m: rm.Tensor) -> rm.Tensor:
    return rm.softmax(x * 2.0 - m.transpose(0, 1), dim=-1)  # an operand strided along the row


def _cases(device: str) -> list[tuple[str, Fn, list[rm.Tensor], list[np.ndarray]]]:
    rng = np.random.default_rng(0)

    def t(*shape: int) -> rm.Tensor:
        return rm.tensor(rng.standard_normal(shape).astype(np.float32), device=device)
    causal = rm.tensor(np.triu(np.full((24, 24), -1e9, np.float32), 1), device=device)
    pad = rm.tensor(np.where(rng.random((2, 1, 1, 24)) < 0.3, -1e9, 0.0).astype(np.float32), device=device)
    w, b = t(37), t(37)

    def ln(x: rm.Tensor, r: rm.Tensor) -> rm.Tensor:
        return F.layer_norm(x + r, (37,), w, b)

    def rms(x: rm.Tensor, r: rm.Tensor) -> rm.Tensor:
        return F.rms_norm(x + r, (37,), w)

    def ls(x: rm.Tensor) -> rm.Tensor:
        return rm.log_softmax(x / 0.7, dim=-1)
    q, k = t(2, 3, 24, 16), t(2, 3, 24, 16)
    xq, xr = t(5, 6, 37), t(5, 6, 37)
    return [("softmax", _attention, [q, k, causal], [q.numpy(), k.numpy(), causal.numpy()]),
            ("softmax", _attention, [q, k, pad], [q.numpy(), k.numpy(), pad.numpy()]),
            ("log_softmax", ls, [t(7, 130)], []),
            ("softmax", _strided, [t(4, 24, 24), t(24, 24)], []),
            ("layer_norm", ln, [xq, xr], []),
            ("rms_norm", rms, [xq, xr], [])]


def _reference(op: str, fn: Fn, args: list[rm.Tensor]) -> np.ndarray:
    a = [x.numpy().astype(np.float64) for x in args]
    if fn is _attention:
        s = a[0] @ np.swapaxes(a[1], -1, -2) * 0.125 + a[2]
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if fn is _strided:
        s = a[0] * 2.0 - a[1].T
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if op == "log_softmax":
        s = a[0] / 0.7
        m = s.max(-1, keepdims=True)
        return s - m - np.log(np.exp(s - m).sum(-1, keepdims=True))
    raise AssertionError(op)


@pytest.mark.parametrize("case", range(6))
def test_a_chain_into_a_row_op_is_one_kernel_with_the_unfused_results(device: str, case: int) -> None:
    op, fn, args, _ = _cases(device)[case]

    def f(*a: rm.Tensor) -> rm.Tensor:
        with rm.no_grad():
            return fn(*a)
    fused, unfused = rm.compile(f), rm.compile(f, fuse=False)
    eager = f(*args)
    for _ in range(3):
        got, plain = fused(*args), unfused(*args)
        _same(got, plain, device)
        _same(got, eager, device)
    assert fused.replays == unfused.replays == 1  # the third call replays
    names = _kernels(fused)
    assert any(n.startswith("fused_row[") and n.endswith(f",{op}]") for n in names), names
    chain_ops = 2 if fn in (_attention, _strided) else 1  # each one kernel less
    assert op not in names and len(names) == len(_kernels(unfused)) - chain_ops, names
    if op in ("softmax", "log_softmax"):
        np.testing.assert_allclose(got.numpy(), _reference(op, fn, args), rtol=2e-5, atol=1e-6)


def test_the_scaled_masked_scores_are_never_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    _, fn, args, _ = _cases("cpu")[0]  # the causal mask
    f = rm.compile(lambda q, k, m: fn(q, k, m).detach())
    f(*args)
    f(*args)
    allocated: list[int] = []
    backend = args[0]._storage.backend
    real = type(backend).allocate

    def counting(self: Any, device: Any, numel: int, dtype: Any) -> Any:
        allocated.append(numel)
        return real(self, device, numel, dtype)
    monkeypatch.setattr(type(backend), "allocate", counting)
    out = f(*args)
    assert allocated == [2 * 3 * 24 * 24]  # the probabilities (the scores' matmul buffer is the captured one)
    np.testing.assert_array_equal(out.numpy(), fn(*args).numpy())


def test_a_chain_value_read_elsewhere_is_written_by_the_fused_kernel(device: str) -> None:
    _, _, (x, r), _ = _cases(device)[4]
    w = rm.tensor(np.linspace(0.5, 1.5, 37).astype(np.float32), device=device)

    def f(x: rm.Tensor, r: rm.Tensor) -> tuple[rm.Tensor, rm.Tensor]:
        with rm.no_grad():
            h = x * 0.5 + r  # the residual stream: returned, so written
            return F.layer_norm(h, (37,), w, None if device == "cpu" else w), h
    g = rm.compile(f)
    for _ in range(3):
        y, h = g(x, r)
        y0, h0 = f(x, r)
        np.testing.assert_array_equal(h.numpy(), h0.numpy())
        _same(y, y0, device)
    names = _kernels(g)
    assert names == ["fused_row[mul,add,layer_norm]"], names


def test_gradients_through_a_fused_attention_and_residual_norm_step(device: str) -> None:
    rm.manual_seed(0)
    d, t = 16, 12
    wq = rm.randn(d, d, device=device, requires_grad=True)
    wk = rm.randn(d, d, device=device, requires_grad=True)
    gamma = rm.ones(d, device=device, requires_grad=True)
    beta = rm.zeros(d, device=device, requires_grad=True)
    mask = rm.tensor(np.triu(np.full((t, t), -1e9, np.float32), 1), device=device)
    params = [wq, wk, gamma, beta]
    opt = rm.optim.SGD(params, lr=0.0)  # its zero_grad: a host region, run again on every replay

    def step(x: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        q, k = x @ wq, x @ wk
        att = rm.softmax(q @ k.transpose(-1, -2) * (d ** -0.5) + mask, dim=-1)
        h = F.layer_norm(att @ x + x, (d,), gamma, beta)
        loss = (h * h).sum()
        loss.backward()
        return loss
    x = rm.randn(3, t, d, device=device)
    eager_loss = step(x)
    eager = [p.grad.numpy().copy() for p in params]
    f = rm.compile(step)
    for _ in range(3):
        loss = f(x)
        _same(loss, eager_loss, device, rtol=1e-5)
        for p, want in zip(params, eager):
            if device == "cpu":
                np.testing.assert_array_equal(p.grad.numpy(), want)
            else:
                np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=1e-4)
    assert f.replays == 1
    names = _kernels(f)
    assert "fused_row[mul,add,softmax]" in names and "fused_row[add,layer_norm]" in names, names


def test_finite_differences_of_a_fused_residual_norm() -> None:
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((3, 9))
    r = rm.tensor(rng.standard_normal((3, 9)).astype(np.float32), device="cpu")
    w = rm.tensor(rng.standard_normal(9).astype(np.float32), device="cpu")
    up = rm.tensor(rng.standard_normal((3, 9)).astype(np.float32), device="cpu")
    x = rm.tensor(x0.astype(np.float32), requires_grad=True, device="cpu")
    opt = rm.optim.SGD([x], lr=0.0)

    def step(x: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        loss = (F.rms_norm(x * 2.0 + r, (9,), w) * up).sum()
        loss.backward()
        return loss
    f = rm.compile(step)
    for _ in range(3):
        f(x)
    assert "fused_row[mul,add,rms_norm]" in _kernels(f) and f.replays == 1

    def ref(xv: np.ndarray) -> float:
        h = xv * 2.0 + r.numpy().astype(np.float64)
        y = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * w.numpy()
        return float((y * up.numpy()).sum())
    eps, num = 1e-6, np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[idx] = eps
        num[idx] = (ref(x0 + e) - ref(x0 - e)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-3, atol=1e-4)


def test_long_rows_over_threads_and_unrenderable_heads() -> None:
    x = rm.randn(64, 1031, device="cpu")
    f = rm.compile(lambda x: rm.softmax(x.sin() * 3.0 - 1.0, dim=-1).detach())  # sin stays its own kernel
    for _ in range(3):
        np.testing.assert_array_equal(f(x).numpy(), rm.softmax(x.sin() * 3.0 - 1.0, dim=-1).numpy())
    assert _kernels(f) == ["sin", "fused_row[mul,sub,softmax]"]


def test_what_is_not_fused_stays_exact() -> None:
    x = rm.randn(6, 10, device="cpu")
    cases: list[Fn] = [
        lambda x: rm.softmax(x * 2.0, dim=0),  # not the last dim
        lambda x: rm.softmax((x * 2.0).transpose(0, 1), dim=-1),  # reads the chain through another view
        lambda x: rm.softmax(x.double() * 2.0, dim=-1),  # float64 rows: no fused kernel
    ]
    for fn in cases:
        f = rm.compile(lambda x, fn=fn: fn(x).detach())
        for _ in range(3):
            np.testing.assert_array_equal(f(x).numpy(), fn(x).numpy())
        assert not any(n.startswith("fused_row") for n in _kernels(f)), _kernels(f)
    off = rm.compile(lambda x: rm.softmax(x * 2.0 + 1.0, dim=-1).detach(), fuse=False)
    apart = rm.compile(lambda x: rm.softmax(x * 2.0 + 1.0, dim=-1).detach(), fuse_rows=False)
    for _ in range(3):
        np.testing.assert_array_equal(off(x).numpy(), apart(x).numpy())
    assert _kernels(off) == ["mul", "add", "softmax"]
    assert _kernels(apart) == ["fused[mul,add]", "softmax"]


@pytest.mark.parametrize("group", [1, 4, 64, 256])
def test_every_webgpu_row_group_size(device: str, group: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """One invocation per row (what a CPU adapter gets) and groups of a workgroup's slots (a GPU's),
    rows not filling the last workgroup."""
    if device == "cpu":
        pytest.skip("a WebGPU launch choice")
    from rumus_wgpu import fused_rows
    monkeypatch.setattr(fused_rows, "group_size", lambda n, cpu: group)
    rng = np.random.default_rng(2)
    x = rm.tensor(rng.standard_normal((3, 7, 130)).astype(np.float32), device=device)
    r = rm.tensor(rng.standard_normal((7, 130)).astype(np.float32), device=device)
    w = rm.tensor(rng.standard_normal(130).astype(np.float32), device=device)

    def fn(x: rm.Tensor, r: rm.Tensor) -> tuple[rm.Tensor, rm.Tensor]:
        with rm.no_grad():
            return rm.log_softmax(x * 0.5 - r, dim=-1), F.layer_norm(x + r, (130,), w, w)
    f = rm.compile(fn)
    for _ in range(3):
        for got, want in zip(f(x, r), fn(x, r)):
            _same(got, want, device)
    assert _kernels(f) == ["fused_row[mul,sub,log_softmax]", "fused_row[add,layer_norm]"]


def test_nan_and_inf_rows_as_unfused(device: str) -> None:
    a = np.random.default_rng(3).standard_normal((4, 9)).astype(np.float32)
    a[1, 4], a[2, :], a[3, 2] = np.nan, -np.inf, np.inf  # a NaN, a fully masked row, an inf
    x = rm.tensor(a, device=device)

    def fn(x: rm.Tensor) -> tuple[rm.Tensor, rm.Tensor]:
        with rm.no_grad():
            return rm.softmax(x * 2.0, dim=-1), rm.log_softmax(x + 1.0, dim=-1)
    f = rm.compile(fn)
    for _ in range(3):
        for got, want in zip((t.numpy() for t in f(x)), (t.numpy() for t in fn(x))):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
            assert np.isnan(got[1]).all()
    assert _kernels(f) == ["fused_row[mul,softmax]", "fused_row[add,log_softmax]"]

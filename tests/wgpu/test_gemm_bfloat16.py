"""The native bfloat16 GEMM: 16-bit words unpacked in the tile loads (no widened float32 copy of an operand),
float32 accumulation, C rounded once. Each layout a Linear layer runs, batched and broadcast operands,
scalar-stride loads, a C of odd width and a split-K launch (both through a float32 C narrowed by copy):
against float64 products of the rounded inputs, and against the CPU backend's bfloat16 matmul (float32
BLAS, rounded once), which it matches to the last bit save for summation order."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import bfloat16
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
ULP = 2.0 ** -7  # bfloat16 spacing relative to the power of two below (8 significant bits)


def test_matmul_is_the_native_kernel_not_the_widening_wrapper() -> None:
    kernel = rm._runtime.plugins().kernels.find("matmul", "wgpu", bfloat16)
    assert kernel is not None and "widened" not in kernel.__name__


def _bf16(a: np.ndarray, device: str) -> rm.Tensor:
    return rm.tensor(a, dtype="bfloat16", device=device)


def _f64(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t.to("float32").numpy(), np.float64)


def _check(fn, *arrays: np.ndarray) -> None:
    got = fn(*(_bf16(a, DEVICE) for a in arrays))
    assert got.dtype == rm.bfloat16
    ins = [_f64(_bf16(a, "cpu")) for a in arrays]
    want = fn(*ins)
    k = arrays[0].shape[-1]
    # the float32 sum is exact to ~k 2^-24; the one rounding to bfloat16 is half an ulp of the result
    np.testing.assert_allclose(_f64(got), want, rtol=ULP / 2 + 1e-6, atol=1e-6 * np.sqrt(k))
    cpu = _f64(fn(*(_bf16(a, "cpu") for a in arrays)))
    assert np.mean(_f64(got) != cpu) < 0.01, "more than 1% of the results differ from the CPU's rounding"


LAYOUTS = {
    "nn": lambda a, b: a @ b,
    "nt": lambda a, b: a @ b.T,                            # x @ W.T (Linear forward): B along K (k4)
    "tn": lambda a, b: a.T @ b,                            # dY.T @ x (weight gradient): A along M (m4)
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("m,k,n", [(5, 7, 9), (64, 64, 64), (130, 72, 260), (33, 100, 16)])
def test_linear_layouts(layout: str, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m + k + n)
    a = rng.uniform(-1, 1, (k, m) if layout == "tn" else (m, k))
    b = rng.uniform(-1, 1, (n, k) if layout == "nt" else (k, n))
    _check(LAYOUTS[layout], a, b)


def test_batched_with_a_broadcast_operand() -> None:
    rng = np.random.default_rng(1)
    _check(lambda a, b: a @ b, rng.uniform(-1, 1, (2, 3, 12, 20)), rng.uniform(-1, 1, (3, 20, 8)))


def test_scalar_stride_loads() -> None:
    """Every other column of A and an offset B: no vec4 layout, each element taken from its half word."""
    rng = np.random.default_rng(2)
    _check(lambda a, b: a[:, ::2] @ b[1:], rng.uniform(-1, 1, (9, 14)), rng.uniform(-1, 1, (8, 6)))


def test_odd_width_result_goes_through_float32() -> None:
    rng = np.random.default_rng(3)
    _check(lambda a, b: a @ b, rng.uniform(-1, 1, (17, 40)), rng.uniform(-1, 1, (40, 5)))


def test_split_k(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_WGPU_GEMM", "64x64w:4")
    rng = np.random.default_rng(4)
    _check(lambda a, b: a @ b, rng.uniform(-1, 1, (70, 512)), rng.uniform(-1, 1, (512, 68)))


def test_gradients_through_autograd() -> None:
    """Linear's three GEMMs in bfloat16 on wgpu against the same on the CPU backend."""
    rng = np.random.default_rng(5)
    x, w, g = rng.uniform(-1, 1, (24, 36)), rng.uniform(-1, 1, (20, 36)), rng.uniform(-1, 1, (24, 20))
    grads = []
    for device in (DEVICE, "cpu"):
        tx, tw = (_bf16(a, device).requires_grad_(True) for a in (x, w))
        (tx @ tw.T).backward(_bf16(g, device))
        grads.append([_f64(tx.grad), _f64(tw.grad)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=2 * ULP, atol=1e-6)

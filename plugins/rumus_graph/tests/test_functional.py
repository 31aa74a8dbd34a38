"""spmm / sddmm / segment and scatter reductions / edge softmax against numpy (float64) and torch."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import IndexOutOfRange, ShapeError
import rumus_graph as rg
from rumus_graph.structure import pointers


def _graph(rng: np.random.Generator, n: int, m: int, nnz: int, device: str) -> tuple[rg.SparseTensor, np.ndarray]:
    row, col = rng.integers(0, n, nnz), rng.integers(0, m, nnz)
    val = rng.uniform(-1, 1, nnz)
    dense = np.zeros((n, m))
    np.add.at(dense, (row, col), val)
    return rg.SparseTensor.from_coo(row, col, val, shape=(n, m), device=device), dense


def test_spmm_and_its_gradients_match_dense(device: str) -> None:
    rng = np.random.default_rng(0)
    a, dense = _graph(rng, 50, 40, 300, device)
    x = rng.uniform(-1, 1, (40, 7))
    xt = rm.tensor(x, dtype=rm.float32, device=device, requires_grad=True)
    a.values.requires_grad_(True)
    out = rg.spmm(a, xt)
    np.testing.assert_allclose(out.numpy(), dense @ x, rtol=1e-5, atol=1e-5)
    g = rng.uniform(-1, 1, (50, 7))
    out.backward(rm.tensor(g, dtype=rm.float32, device=device))
    np.testing.assert_allclose(xt.grad.numpy(), dense.T @ g, rtol=1e-5, atol=1e-5)
    row, col = a.coo()
    np.testing.assert_allclose(a.values.grad.numpy(), np.sum(g[row] * x[col], axis=1), rtol=1e-5, atol=1e-5)


def test_spmm_matches_torch_sparse() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a, _ = _graph(rng, 30, 20, 100, "cpu")
    row, col = a.coo()
    t = torch.sparse_coo_tensor(np.stack([row, col]), a.values.numpy().astype(np.float64), (30, 20),
                                check_invariants=True)
    x = rng.uniform(-1, 1, (20, 4))
    got = rg.spmm(a, rm.tensor(x, dtype=rm.float32)).numpy()
    np.testing.assert_allclose(got, (t @ torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_sddmm(device: str) -> None:
    rng = np.random.default_rng(2)
    a, _ = _graph(rng, 12, 9, 40, device)
    p, q = rng.uniform(-1, 1, (12, 5)), rng.uniform(-1, 1, (9, 5))
    row, col = a.coo()
    pt, qt = (rm.tensor(v, dtype=rm.float32, device=device) for v in (p, q))
    got = rg.sddmm(a, pt, qt).numpy()
    np.testing.assert_allclose(got, np.sum(p[row] * q[col], axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_scatter_matches_torch_scatter_reduce(device: str, reduce: str) -> None:
    """Unsorted indices, empty targets, gradients: torch.scatter_reduce (include_self=False) is the reference;
    empty targets are 0 as in torch_scatter."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    src = rng.uniform(-1, 1, (40, 3))
    index = rng.integers(0, 12, 40)
    index[index == 5] = 6  # target 5 gets nothing
    s = rm.tensor(src, dtype=rm.float32, device=device, requires_grad=True)
    out = getattr(rg, f"scatter_{reduce}")(s, index, dim_size=13)
    ts = torch.tensor(src, requires_grad=True)
    ti = torch.tensor(index)[:, None].expand(40, 3)
    want = torch.zeros(13, 3, dtype=torch.float64).scatter_reduce(
        0, ti, ts, {"sum": "sum", "mean": "mean", "max": "amax"}[reduce], include_self=False)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.uniform(-1, 1, (13, 3))
    out.backward(rm.tensor(g, dtype=rm.float32, device=device))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_segment_argmax_and_empty_segments(device: str) -> None:
    src = rm.tensor([[1.0, 5.0], [3.0, 2.0], [0.5, 9.0]], device=device)
    ptr = np.array([0, 2, 2, 3])
    np.testing.assert_array_equal(rg.segment_argmax(src, ptr).numpy(), [[1, 0], [-1, -1], [2, 2]])
    np.testing.assert_array_equal(rg.segment_max(src, ptr).numpy(), [[3, 5], [0, 0], [0.5, 9]])
    np.testing.assert_allclose(rg.segment_mean(src, ptr).numpy(), [[2, 3.5], [0, 0], [0.5, 9]])


def test_edge_softmax_sums_to_one_per_target(device: str) -> None:
    rng = np.random.default_rng(4)
    a, _ = _graph(rng, 20, 20, 80, device)
    logits = rng.normal(0, 3, (a.nnz, 2))
    alpha = rg.edge_softmax(a, rm.tensor(logits, dtype=rm.float32, device=device)).numpy()
    row, _ = a.coo()
    for i in np.unique(row):
        seg = logits[row == i]
        e = np.exp(seg - seg.max(0))
        np.testing.assert_allclose(alpha[row == i], e / e.sum(0), rtol=1e-5, atol=1e-6)


def test_gradients_of_composed_ops_match_finite_differences() -> None:
    """A GAT-like chain (sddmm -> edge_softmax -> spmm -> scatter_max) in float64 against central differences."""
    rng = np.random.default_rng(5)
    a, _ = _graph(rng, 6, 6, 20, "cpu")
    row, col = a.coo()
    a = rg.SparseTensor.from_coo(row, col, rng.uniform(0.5, 1, row.size), shape=(6, 6), dtype=rm.float64)
    index = rng.integers(0, 3, 6)

    def f(x: np.ndarray) -> float:
        xt = rm.tensor(x, dtype=rm.float64)
        alpha = rg.edge_softmax(a, rg.sddmm(a, xt, xt))
        h = rg.spmm(a.with_values(alpha), xt)
        return float(rg.scatter_max(h, index, dim_size=3).sum().item())

    x = rng.uniform(-1, 1, (6, 3))
    xt = rm.tensor(x, dtype=rm.float64, requires_grad=True)
    alpha = rg.edge_softmax(a, rg.sddmm(a, xt, xt))
    rg.scatter_max(rg.spmm(a.with_values(alpha), xt), index, dim_size=3).sum().backward()
    num = np.zeros_like(x)
    for k in range(x.size):
        d = np.zeros_like(x)
        d.flat[k] = 1e-6
        num.flat[k] = (f(x + d) - f(x - d)) / 2e-6
    np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-5, atol=1e-7)


def test_bad_indices_raise_before_any_kernel(device: str) -> None:
    src = rm.ones(4, 2, device=device)
    with pytest.raises(IndexOutOfRange, match="index\\[2\\] = 7"):
        rg.scatter_sum(src, [0, 1, 7, 2], dim_size=5)
    with pytest.raises(IndexOutOfRange, match="-1"):
        rg.scatter_mean(src, [0, -1, 1, 2])
    with pytest.raises(IndexOutOfRange, match="ptr"):
        rg.segment_sum(src, [0, 3, 2, 4])
    with pytest.raises(IndexOutOfRange, match="ptr"):
        rg.segment_sum(src, [0, 1, 5])
    with pytest.raises(ShapeError, match="4 rows"):
        rg.scatter_sum(src, [0, 1, 2])


def test_raw_cpu_kernel_refuses_a_corrupt_structure() -> None:
    """Calling the op directly with a hand-made bad structure: the C kernel checks every index."""
    ptr = rm.tensor(pointers(np.array([0, 1]), 2), dtype=rm.int32)
    bad_col = rm.tensor(np.array([0, 9], np.int32), dtype=rm.int32)
    csc = rm.tensor(np.array([0, 1, 2], np.int32), dtype=rm.int32)
    two = rm.tensor(np.array([0, 1], np.int32), dtype=rm.int32)
    with pytest.raises(IndexOutOfRange, match="graph_spmm"):
        rm.ops.graph_spmm(ptr, bad_col, csc, two, two, rm.ones(2), rm.ones(2, 3))
    with pytest.raises(IndexOutOfRange, match="pointer"):
        rm.ops.graph_segment_sum(rm.ones(3, 2), rm.tensor(np.array([0, 2, 1, 3], np.int32), dtype=rm.int32))


def test_cpu_results_do_not_depend_on_the_thread_count() -> None:
    """Atomic-free kernels: bitwise-identical SpMM, its transpose and scatter at 1 and 2 OpenMP threads."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np, hashlib, rumus as rm, rumus_graph as rg\n"
            "rng = np.random.default_rng(0); n = 3000\n"
            "a = rg.SparseTensor.from_coo(rng.integers(0, n, 60000), rng.integers(0, n, 60000),"
            " rng.uniform(-1, 1, 60000), shape=(n, n))\n"
            "x = rm.tensor(rng.normal(size=(n, 32)), dtype=rm.float32)\n"
            "outs = [rg.spmm(a, x), rg.spmm(a.t(), x), rg.scatter_sum(x, rng.integers(0, 50, n), dim_size=50)]\n"
            "print(hashlib.sha256(b''.join(o.numpy().tobytes() for o in outs)).hexdigest())\n")
    digests = set()
    for threads in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "RUMUS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads})
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests

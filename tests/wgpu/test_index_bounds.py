"""wgpu index kernels: out-of-range indices raise IndexOutOfRange (as on the CPU) at the next host read,
with no extra sync; the atomic scatter path (embedding / index_add / scatter_add backward with many
entries) matches a float64 reference, and RUMUS_WGPU_DETERMINISTIC=1 gives bit-identical reruns."""

import numpy as np
import pytest
from backends_under_test import wgpu_backend_or_skip

import rumus as rm
from rumus import IndexOutOfRange
from rumus import nn

BACKEND = wgpu_backend_or_skip()
DEVICE = "wgpu:0"


def _syncs() -> int:
    return BACKEND.stats(0)["syncs"]


@pytest.mark.parametrize("bad", [5, -1, 1 << 40])
def test_gather_out_of_range_raises_at_the_next_read_naming_the_op(bad):
    x = rm.tensor(np.arange(10, dtype=np.float32).reshape(2, 5), device=DEVICE)
    idx = rm.tensor(np.array([[0, bad], [1, 2]], dtype=np.int64), device=DEVICE)
    before = _syncs()
    y = rm.gather(x, 1, idx)
    assert _syncs() == before  # the check costs no sync of its own
    with pytest.raises(IndexOutOfRange, match="gather"):
        y.numpy()
    # the flag was cleared: good work afterwards reads normally
    ok = rm.gather(x, 1, rm.tensor(np.array([[4], [0]], dtype=np.int64), device=DEVICE))
    np.testing.assert_array_equal(ok.numpy(), [[4.0], [5.0]])


def test_index_select_and_embedding_out_of_range_raise():
    w = rm.tensor(np.ones((4, 3), dtype=np.float32), device=DEVICE)
    with pytest.raises(IndexOutOfRange, match="index_select"):
        rm.index_select(w, 0, rm.tensor(np.array([0, 4], dtype=np.int64), device=DEVICE)).numpy()
    emb = nn.Embedding(4, 3).to(DEVICE)
    with pytest.raises(IndexOutOfRange, match="embedding"):
        emb(rm.tensor(np.array([[1, 7]], dtype=np.int32), device=DEVICE)).numpy()


@pytest.mark.parametrize("n", [8, 300])  # deterministic walk and atomic path
def test_scatter_add_out_of_range_raises(n):
    x = rm.zeros((3,), device=DEVICE)
    idx = np.zeros(n, dtype=np.int64)
    idx[-1] = 3
    src = rm.ones((n,), device=DEVICE)
    with pytest.raises(IndexOutOfRange, match="scatter_add"):
        rm.scatter_add(x, 0, rm.tensor(idx, device=DEVICE), src).numpy()


def _embedding_grad(indices: np.ndarray, vocab: int, dim: int, padding_idx=None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    g = rng.standard_normal((*indices.shape, dim)).astype(np.float32)
    emb = nn.Embedding(vocab, dim, padding_idx=padding_idx).to(DEVICE)
    out = emb(rm.tensor(indices, device=DEVICE))
    out.backward(rm.tensor(g, device=DEVICE))
    want = np.zeros((vocab, dim))
    np.add.at(want, indices.reshape(-1), g.reshape(-1, dim).astype(np.float64))
    if padding_idx is not None:
        want[padding_idx] = 0.0
    return emb.weight.grad.numpy(), want


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_backward_atomic_matches_reference(padding_idx):
    rng = np.random.default_rng(1)
    indices = rng.integers(0, 50, size=(4, 100))  # 400 entries: the atomic path, many repeats per row
    got, want = _embedding_grad(indices, 50, 24, padding_idx)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_index_add_atomic_matches_reference():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    idx = rng.integers(0, 6, size=200)
    src = rng.standard_normal((200, 5)).astype(np.float32)
    got = rm.index_add(rm.tensor(x, device=DEVICE), 0, rm.tensor(idx, device=DEVICE),
                       rm.tensor(src, device=DEVICE), alpha=0.5).numpy()
    want = x.astype(np.float64)
    np.add.at(want, idx, 0.5 * src.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_scatter_add_atomic_on_dim_1_matches_reference():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    idx = rng.integers(0, 7, size=(3, 64))
    src = rng.standard_normal((3, 64)).astype(np.float32)
    got = rm.scatter_add(rm.tensor(x, device=DEVICE), 1, rm.tensor(idx, device=DEVICE),
                         rm.tensor(src, device=DEVICE)).numpy()
    want = x.astype(np.float64)
    for i in range(3):
        np.add.at(want[i], idx[i], src[i].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_deterministic_mode_is_bit_reproducible(monkeypatch):
    monkeypatch.setenv("RUMUS_WGPU_DETERMINISTIC", "1")
    rng = np.random.default_rng(4)
    indices = rng.integers(0, 10, size=(300,))
    first, want = _embedding_grad(indices, 10, 8)
    second, _ = _embedding_grad(indices, 10, 8)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("deterministic, n, dispatches", [("", 200, 2), ("1", 200, 1), ("", 8, 1)])
def test_scatter_strategy_follows_entry_count_and_mode(monkeypatch, deterministic, n, dispatches):
    # atomic: a fill pass plus the atomic pass; deterministic (forced, or few entries): one walk
    monkeypatch.setenv("RUMUS_WGPU_DETERMINISTIC", deterministic)
    x, idx = rm.zeros((4, 3), device=DEVICE), rm.tensor(np.arange(n) % 4, device=DEVICE)
    src = rm.ones((n, 3), device=DEVICE)
    before = BACKEND.stats(0)["dispatches"]
    y = rm.index_add(x, 0, idx, src)
    assert BACKEND.stats(0)["dispatches"] - before == dispatches
    np.testing.assert_array_equal(y.numpy(), np.bincount(np.arange(n) % 4, minlength=4)[:, None] * np.ones(3))

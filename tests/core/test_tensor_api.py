"""Tensor creation, dtypes, views, indexing, repr and user-facing errors."""

import numpy as np
import pytest

import rumus as rm
from rumus import DeviceMismatch, DTypeError, RumusError, ShapeError


def test_creation_functions_and_dtypes():
    assert rm.tensor([1.0, 2.0]).dtype == rm.float32
    assert rm.tensor([1, 2]).dtype == rm.int64
    assert rm.tensor([True]).dtype == rm.bool
    assert rm.tensor(np.zeros(2)).dtype == rm.float64
    assert rm.zeros(2, 3).shape == (2, 3)
    assert rm.ones((2,), dtype="int32").tolist() == [1, 1]
    assert rm.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert rm.arange(5).tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(rm.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    assert rm.eye(3).numpy().trace() == 3
    rm.manual_seed(1)
    a = rm.randn(3, 4).numpy()
    rm.manual_seed(1)
    assert np.array_equal(a, rm.randn(3, 4).numpy())
    r = rm.randint(0, 5, (100,)).numpy()
    assert r.min() >= 0 and r.max() < 5
    assert rm.zeros_like(rm.ones(2, dtype="float64")).dtype == rm.float64
    g = rm.Generator(3)
    assert np.array_equal(rm.rand(4, generator=g).numpy(), rm.rand(4, generator=rm.Generator(3)).numpy())


def test_dtype_casts_and_promotion():
    x = rm.tensor([1.7, -2.7])
    assert x.long().tolist() == [1, -2]
    assert (rm.tensor([1, 2]) + 0.5).dtype == rm.float32
    assert (rm.tensor([1, 2]) / 2).tolist() == [0.5, 1.0]
    assert (x.double() + x).dtype == rm.float64
    assert (x > 0).dtype == rm.bool


def test_views_share_storage_and_versions():
    x = rm.arange(6, dtype="float32")
    v = x.view(2, 3)
    with rm.no_grad():
        v[0, 1] = 10.0
    assert x.tolist()[1] == 10.0
    t = v.T
    assert not t.is_contiguous() and t.contiguous().is_contiguous()
    assert v.unsqueeze(0).shape == (1, 2, 3) and v.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert x.reshape(3, 2)[..., 1].tolist() == [10.0, 3.0, 5.0]
    assert v[:, None, 1].shape == (2, 1)
    assert [c.shape for c in x.split(4)] == [(4,), (2,)]


def test_matmul_shapes_and_errors():
    a, b = rm.randn(2, 3, 4), rm.randn(4, 5)
    assert (a @ b).shape == (2, 3, 5)
    assert (rm.randn(4) @ rm.randn(4, 2)).shape == (2,)
    with pytest.raises(ShapeError, match=r"\(3, 4\).*\(5, 2\)|\(5, 2\).*\(3, 4\)"):
        rm.randn(3, 4) @ rm.randn(5, 2)


def test_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ShapeError, match=r"add.*\(2, 3\).*\(4,\)"):
        rm.ones(2, 3) + rm.ones(4)


def test_mixed_float_dtypes_in_matmul_name_both():
    with pytest.raises(DTypeError, match="float32.*float64"):
        rm.randn(2, 3) @ rm.randn(3, 2, dtype="float64")


def test_dtype_and_device_errors_name_both():
    with pytest.raises(DTypeError, match="matmul"):
        rm.tensor([[1, 2]]) @ rm.tensor([[1], [2]])
    with pytest.raises(RumusError, match="unknown dtype"):
        rm.zeros(2, dtype="float13")
    with pytest.raises(RumusError, match="installed backends"):
        rm.zeros(2, device="nosuch")


def test_device_mismatch_message_names_both_devices(monkeypatch):
    import rumus._storage as st
    a = rm.ones(2)
    b = rm.ones(2)
    fake = rm.Device("cpu", 1)
    b._storage = st.Storage(b._storage.buffer, fake, b.dtype, b._storage.backend, 2)
    with pytest.raises(DeviceMismatch, match="cpu.*cpu:1"):
        a + b


def test_repr_and_item():
    x = rm.tensor([[1.0, 2.0]], requires_grad=True)
    assert "requires_grad=True" in repr(x)
    assert "grad_fn=<mulBackward>" in repr(x * 2)
    assert rm.tensor(3.5).item() == 3.5
    with pytest.raises(RumusError, match="one element"):
        x.item()


def test_reductions_with_dim_keepdim():
    x = rm.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.sum().item() == 21
    assert x.sum(1).tolist() == [6, 15]
    assert x.mean(0, keepdim=True).shape == (1, 3)
    assert x.argmax().item() == 5
    assert x.argmax(1).tolist() == [2, 2]
    np.testing.assert_allclose(x.var(1).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.std().item(), np.std(np.arange(1, 7), ddof=1), rtol=1e-6)
    np.testing.assert_allclose(x.logsumexp(1).numpy(), np.log(np.exp(x.numpy()).sum(1)), rtol=1e-6)
    assert x.prod().item() == 720
    assert rm.softmax(x, 1).sum(1).tolist() == pytest.approx([1.0, 1.0])


def test_where_clamp_comparisons():
    x = rm.tensor([-1.0, 0.5, 2.0])
    assert rm.where(x > 0, x, 0.0).tolist() == [0.0, 0.5, 2.0]
    assert x.clamp(-0.5, 1.0).tolist() == [-0.5, 0.5, 1.0]
    assert (x == 0.5).tolist() == [False, True, False]
    assert rm.maximum(x, rm.zeros(3)).tolist() == [0.0, 0.5, 2.0]


def test_zero_dim_tensors_stay_zero_dim():
    assert rm.tensor(5.0).shape == ()
    assert rm.from_numpy(np.array(2.0)).shape == ()
    assert (rm.tensor(2.0) * rm.ones(3)).shape == (3,)

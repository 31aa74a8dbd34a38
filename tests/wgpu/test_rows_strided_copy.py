"""Same-dtype strided copies on wgpu (.contiguous() of transposed / permuted views: attention's head split)
take copy_strided.wgsl: exact values for permutations of up to four coalesced dims, vec4 and scalar units,
offsets, broadcast (stride 0) sources, every stored dtype; more dims still take the general map."""

import itertools

import numpy as np
import pytest

import rumus as rm
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(8)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
@pytest.mark.parametrize("shape", [(2, 5, 3, 8), (3, 4, 6, 5), (1, 7, 2, 4)])
def test_permutations_of_four_dims(shape, perm):
    x = RNG.standard_normal(shape).astype(np.float32)
    t = rm.tensor(x, device=DEVICE)
    got = t.permute(*perm).contiguous().numpy()
    assert np.array_equal(got, np.ascontiguousarray(x.transpose(perm)))


def test_head_split_transpose():
    x = RNG.standard_normal((2, 64, 4, 16)).astype(np.float32)
    t = rm.tensor(x, device=DEVICE)
    assert np.array_equal(t.transpose(1, 2).contiguous().numpy(), np.ascontiguousarray(x.transpose(0, 2, 1, 3)))
    back = t.transpose(1, 2).contiguous().transpose(1, 2).contiguous()
    assert np.array_equal(back.numpy(), x)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16", "int64"])
def test_dtypes_and_offsets(dtype):
    x = RNG.integers(-50, 50, (6, 9, 8))
    t = rm.tensor(x, device=DEVICE).to(dtype=dtype) if dtype != "float16" else None
    if t is None:
        try:
            t = rm.tensor(x.astype(np.float32), device=DEVICE).to(dtype="float16")
        except rm.DTypeError:
            pytest.skip("no shader-f16 on this adapter")
    view = t[1:, 2:7].transpose(0, 2)  # offset, strided, permuted
    want = np.ascontiguousarray(t.numpy()[1:, 2:7].transpose(2, 1, 0))
    assert np.array_equal(view.contiguous().numpy(), want)


def test_broadcast_source_and_six_dims():
    x = RNG.standard_normal((3, 1, 5)).astype(np.float32)
    t = rm.tensor(x, device=DEVICE)
    assert np.array_equal(t.expand(3, 4, 5).contiguous().numpy(), np.broadcast_to(x, (3, 4, 5)))
    y = RNG.standard_normal((2, 3, 2, 3, 2, 4)).astype(np.float32)
    perm = (5, 3, 1, 0, 2, 4)
    assert np.array_equal(rm.tensor(y, device=DEVICE).permute(*perm).contiguous().numpy(),
                          np.ascontiguousarray(y.transpose(perm)))


def test_the_strided_kernel_runs():
    t = rm.tensor(RNG.standard_normal((4, 8, 2, 16)).astype(np.float32), device=DEVICE)
    t.transpose(1, 2).contiguous().numpy()
    keys = [k for k in t._arg.buffer.dev.programs._cache if isinstance(k, tuple) and k[0] == "copy_strided"]
    assert ("copy_strided", "f32", True) in keys

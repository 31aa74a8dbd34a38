"""The matrix-unit float16 GEMM (matrix_gemm.py, matrix_units.py): its WGSL for every layout and epilogue, the
fallback to the WGSL GEMM where no device offers subgroup matrices, and, on a Dawn device that has them
(RUMUS_WGPU_IMPL=dawn on a GPU with f16 16x16 configs), its results against numpy."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus_wgpu.matrix_gemm import MatrixTile, generate
from rumus_wgpu.matrix_units import TILE
from rumus_wgpu.pipelines import parse_bindings
from tests.wgpu.wgpu_required import wgpu_or_skip

VULKAN_WORKGROUP_BYTES = 49152  # NVIDIA's Vulkan limit, the smallest among the drivers with matrix units


@pytest.mark.parametrize(("a_t", "b_t", "c_dtype", "bias", "act"),
                         [(a_t, b_t, c, "", "") for a_t, b_t, c in itertools.product((False, True), (False, True),
                                                                                        ("f32", "f16"))]
                         + [(False, True, "f16", "f16", "gelu_tanh"), (False, False, "f32", "f32", "relu")])
def test_wgsl_bindings_and_workgroup_memory(a_t: bool, b_t: bool, c_dtype: str, bias: str, act: str) -> None:
    src = generate(TILE, a_t, b_t, c_dtype, bias=bias, activation=act)
    kinds = [k for _, k in parse_bindings(src)]
    assert kinds == ["storage", "read-only-storage", "read-only-storage", *(["read-only-storage"] if bias else []),
                     "uniform"]
    assert src.count("subgroupMatrixMultiplyAccumulate") == TILE.tm * TILE.tn * TILE.bk // 16
    assert TILE.shared_bytes(a_t, b_t, direct=False) <= VULKAN_WORKGROUP_BYTES


def test_direct_store_refuses_an_epilogue() -> None:
    with pytest.raises(ValueError):
        generate(TILE, False, False, "f16", direct=True)
    with pytest.raises(ValueError):
        generate(MatrixTile(128, 128, 24, 4, 2), False, False)


def _dev() -> object:
    backend, _ = wgpu_or_skip()
    return backend.device(0)


def test_float16_matmul_matches_numpy_on_either_path() -> None:
    """On wgpu-native (and Dawn without subgroup matrices) the WGSL GEMM runs; on a Dawn device with them
    the matrix units do. Either way the result is the f32 product of the f16 inputs, rounded once."""
    from rumus_wgpu.matrix_units import available
    dev: Any = _dev()
    if "shader-f16" not in dev.features:
        pytest.skip("the wgpu device has no shader-f16")
    rng = np.random.default_rng(1)
    for (m, k, n), (ta, tb) in itertools.product(((128, 128, 128), (136, 72, 264), (256, 32, 128)),
                                                 ((False, False), (False, True), (True, False))):
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float16)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float16)
        x, y = rm.tensor(a, device="wgpu"), rm.tensor(b, device="wgpu")
        got = ((x.T if ta else x) @ (y.T if tb else y)).numpy().astype(np.float64)
        want = (a.T if ta else a).astype(np.float32) @ (b.T if tb else b).astype(np.float32)
        # f16 output: one rounding (2^-11 relative) of an f32-accumulated sum
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
    took = any(isinstance(key, tuple) and key[:1] == ("matrix_gemm",) for key in dev.programs._cache)
    assert took == available(dev)  # the matrix units where the device has them, the WGSL GEMM elsewhere


def test_matrix_units_on_dawn() -> None:
    from rumus_wgpu.matrix_units import available
    if not available(_dev()):
        pytest.skip("no Dawn device with subgroup matrices (f16 16x16, RUMUS_WGPU_IMPL=dawn on such a GPU): "
                    "the fallback test above covers this machine")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 264, 136)).astype(np.float16)
    b = rng.standard_normal((3, 136, 520)).astype(np.float16)
    got = (rm.tensor(a, device="wgpu") @ rm.tensor(b, device="wgpu")).numpy().astype(np.float64)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())

"""linear on the CPU backend: one blocked GEMM with the bias added in each block's epilogue (rumus_gemm_bias,
csrc/gemm_blocked.c). Its results must equal matmul followed by a broadcast add bit for bit (the same BLAS
calls, then the same single additions) and stay bit-identical at every thread count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

import rumus as rm  # noqa: E402
from rumus import _math as M  # noqa: E402
from rumus.ops import get as op  # noqa: E402

from thread_count_runs import run_at_each_thread_count  # noqa: E402


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cpu_runs_the_fused_kernel_bit_identical_to_matmul_then_add(dt: Any) -> None:
    rng = np.random.default_rng(8)
    layer = rm.nn.Linear(300, 70).to(rm.float32 if dt == np.float32 else rm.float64)
    x = rm.tensor(rng.standard_normal((130, 300)).astype(dt))
    y = layer(x)
    assert y.grad_fn is not None and y.grad_fn.name == "linear"  # the kernel's output (the composite's is add's)
    unfused = M.add(M.matmul(x, layer.weight.mT), layer.bias).numpy()
    np.testing.assert_array_equal(y.numpy(), unfused)
    assert np.abs(y.numpy() - (x.numpy() @ layer.weight.numpy().T)).max() > 1e-3  # the bias really was added


def test_cpu_fused_kernel_without_features_gives_the_bias() -> None:
    x, w, b = rm.randn(3, 0), rm.randn(2, 0), rm.randn(2)
    np.testing.assert_array_equal(op("linear")(x, w, b).numpy(), np.broadcast_to(b.numpy(), (3, 2)))


class _NoBlas:
    """The compiled library as it is when numpy's BLAS could not be attached (rumus_gemm_* refuse)."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        if name in ("rumus_gemm_attached", "rumus_gemm_bias", "rumus_gemm"):
            return lambda *_: 0
        return getattr(self._lib, name)


def test_without_blas_attached_numpy_computes_it(monkeypatch: Any) -> None:
    from rumus_cpu import kernels_linalg
    monkeypatch.setattr(kernels_linalg, "lib", _NoBlas(kernels_linalg.lib))
    rng = np.random.default_rng(9)
    xa, wa, ba = rng.standard_normal((2, 9, 17)), rng.standard_normal((5, 17)), rng.standard_normal(5)
    y = op("linear")(rm.tensor(xa), rm.tensor(wa), rm.tensor(ba))
    np.testing.assert_allclose(y.numpy(), xa @ wa.T + ba, rtol=1e-12, atol=1e-12)


SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus.nn import functional as F
from rumus_cpu import threads
rng = np.random.default_rng(0)
x = rm.tensor(rng.standard_normal((128, 784)).astype(np.float32), requires_grad=True)
w = rm.tensor((rng.standard_normal((256, 784)) * 0.05).astype(np.float32), requires_grad=True)
b = rm.tensor(rng.standard_normal(256).astype(np.float32), requires_grad=True)
y = F.linear(x, w, b)
(y * y).sum().backward()
np.savez(sys.argv[1], y=y.numpy(), gx=x.grad.numpy(), gw=w.grad.numpy(), gb=b.grad.numpy())
print(json.dumps({"threads": threads.get_num_threads()}))
"""


def test_bit_identical_at_every_thread_count(tmp_path: Path) -> None:
    (first, one), *rest = run_at_each_thread_count(SCRIPT, tmp_path)
    assert [first["threads"], *(info["threads"] for info, _ in rest)] == [1, 2, 3, 4]
    for info, arrays in rest:
        for key in ("y", "gx", "gw", "gb"):  # named: a result the script stopped saving fails here
            np.testing.assert_array_equal(arrays[key], one[key], err_msg=f"{key} at {info['threads']} threads")

"""A wgpu tensor freed inside a reference cycle gives its buffer back to the pool intact: the garbage
collector finalizes a cycle's objects in no set order, and wgpu-py's own finalizer used to release the
GPUBuffer first, so the next tensor of that size got a dead buffer ("initializer for ctype 'struct
WGPUBufferImpl *' must be a cdata pointer"; an imported ONNX LSTM reloaded in a loop failed on its third run).
"""

from __future__ import annotations

import gc
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wgpu_required import wgpu_or_skip

import rumus as rm
from rumus_wgpu.pool import BufferPool

BACKEND, DEVICE = wgpu_or_skip()


class FakeBuffer:
    def __init__(self) -> None:
        self._internal: Any = object()  # wgpu-py sets it to None when it releases the native buffer
        self.destroyed = False

    def destroy(self) -> None:
        self.destroyed = True


class FakeDevice:
    def create_buffer(self, size: int, usage: int) -> FakeBuffer:
        return FakeBuffer()


def test_the_pool_never_caches_a_released_or_foreign_buffer() -> None:
    pool = BufferPool(FakeDevice(), max_binding=1 << 30, max_buffer=1 << 30)
    buf, size = pool.acquire(1000)
    assert pool.stats()["lent_buffers"] == 1  # held while lent: never garbage before its handle
    buf._internal = None  # what wgpu-py's finalizer does
    pool.release(buf, size)
    assert pool.stats()["cached_buffers"] == 0
    again, _ = pool.acquire(1000)
    assert again is not buf
    pool.release(again, size)
    pool.release(again, size)  # a second release of the same buffer is not a second cached copy
    pool.release(FakeBuffer(), size)  # nor is a buffer this pool never lent
    assert pool.stats()["cached_buffers"] == 1 and pool.stats()["lent_buffers"] == 0


class Holder:
    pass


def test_tensors_freed_in_cycles_leave_working_buffers() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        for i in range(8):
            h = Holder()
            # uploaded and never bound by a kernel: nothing but the handle holds its GPUBuffer
            h.t = rm.tensor(np.full(1000, float(i), np.float32), device=DEVICE)  # type: ignore[attr-defined]
            h.self = h  # type: ignore[attr-defined]
            del h
            gc.collect()
            y = rm.tensor(np.ones(1000, np.float32), device=DEVICE) * 3
            assert float(y.sum().item()) == 3000.0
    finally:
        if was:
            gc.enable()


def test_a_reloaded_onnx_lstm_runs_ten_times(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.LSTM(6, 5, batch_first=True, num_layers=2).eval()
    path = os.path.join(tmp_path, "lstm.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(tm, (torch.randn(3, 7, 6),), path, input_names=["x"], output_names=["y", "h"],
                          dynamic_axes={"x": {0: "batch", 1: "seq"}}, dynamo=False)
    for _ in range(10):
        loaded = rm.onnx.load(path, device=DEVICE)
        xs = torch.randn(3, 7, 6)
        with torch.no_grad():
            want = tm(xs)[0].numpy()
        got = loaded(rm.tensor(xs.numpy(), device=DEVICE))
        got = got[0] if isinstance(got, tuple) else got
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

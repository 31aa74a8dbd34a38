"""Shared-memory CPU tensors: `Tensor.share_memory_()` moves a host-memory storage into a named POSIX
shared-memory segment, so processes that receive the tensor through rumus.multiprocessing (fork or spawn)
read and write the same numbers — Hogwild training. The process that shares a storage owns its segment
and unlinks it when the storage is collected or the process exits; receivers only attach."""

from __future__ import annotations

import weakref
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from ._storage import Storage
from ._tensor_base import Tensor, make_tensor

# storage -> its segment (the sharer's and each receiver's handle keep the mapping alive)
_SEGMENTS: weakref.WeakKeyDictionary[Storage, shared_memory.SharedMemory] = weakref.WeakKeyDictionary()


def is_shared(t: Tensor) -> bool:
    return t._storage in _SEGMENTS


def share_(t: Tensor) -> Tensor:
    """Move t's storage (all its views with it) into shared memory; a no-op if it already is."""
    storage = t._storage
    if storage in _SEGMENTS:
        return t
    buf = storage.buffer
    if not isinstance(buf, np.ndarray):
        raise RumusError(f"share_memory_(): tensors on {storage.device} are not in host memory; share CPU tensors "
                         f"(move with .to('cpu') first)")
    seg = shared_memory.SharedMemory(create=True, size=max(buf.nbytes, 1))
    shared = np.ndarray(buf.shape, buf.dtype, buffer=seg.buf)
    shared[...] = buf
    storage.buffer = shared
    t._arg_cache = None
    _SEGMENTS[storage] = seg
    weakref.finalize(storage, _release, seg, True)
    return t


def _release(seg: shared_memory.SharedMemory, owner: bool) -> None:
    try:
        seg.close()
    except BufferError:  # a numpy view still exports the buffer at interpreter exit: the OS frees the mapping
        pass
    if owner:
        try:
            seg.unlink()
        except FileNotFoundError:
            pass


def reduce_shared(t: Tensor) -> tuple[Any, tuple[Any, ...]]:
    """How rumus.multiprocessing sends a tensor: by segment name when shared, else by value."""
    seg = _SEGMENTS.get(t._storage)
    if seg is None:
        by_value: tuple[Any, tuple[Any, ...]] = t.__reduce__()
        return by_value
    s = t._storage
    return (_attach, (seg.name, s.numel, s.dtype, str(s.device), tuple(t.shape), tuple(t._strides), t._offset,
                      t.requires_grad, type(t)))


def _attach(name: str, numel: int, dtype: Any, device: str, shape: tuple[int, ...], strides: tuple[int, ...],
            offset: int, requires_grad: bool, cls: type) -> Tensor:
    from . import _runtime
    from rumus_contracts import Device
    # processes started by multiprocessing share their parent's resource tracker, which the sharer's unlink
    # already unregisters from: attaching registers the same name again (a no-op in its set)
    seg = shared_memory.SharedMemory(name=name)
    dev = Device.parse(device)
    buf = np.ndarray((numel,), dtype.numpy, buffer=seg.buf)
    storage = Storage(buf, dev, dtype, _runtime.backend(dev.backend), numel)
    _SEGMENTS[storage] = seg
    weakref.finalize(storage, _release, seg, False)
    t = make_tensor(storage, shape, strides, offset)
    if cls is not Tensor:
        from .nn.parameter import Buffer, Parameter
        if cls is Parameter:
            return Parameter(t, requires_grad)
        if cls is Buffer:
            return Buffer(t)
    return t.requires_grad_(True) if requires_grad else t

"""Collation: a list of samples -> one batch, recursing into tuples, lists, namedtuples and dicts.

`numpy_collate` builds the batch on the host (what DataLoader workers run); `as_tensors` turns its
arrays into rumus Tensors in the main process. `default_collate` is both in one call, and stacks
rumus Tensors with `rumus.stack` so they stay on their device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError

from .._math import stack
from ..tensor import Tensor
from ._tensors import host_tensor


def _collate(batch: Sequence[Any], leaf: Callable[[np.ndarray], Any], tensors: bool) -> Any:
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch)) if tensors else np.stack([t.numpy() for t in batch])
    if isinstance(elem, np.ndarray):
        return leaf(np.stack(batch))
    # bool before int: bool is an int subclass; Python floats become float32, RUMUS's default float
    if isinstance(elem, (bool, np.bool_)):
        return leaf(np.asarray(batch, dtype=np.bool_))
    if isinstance(elem, np.generic):
        return leaf(np.asarray(batch))
    if isinstance(elem, int):
        return leaf(np.asarray(batch, dtype=np.int64))
    if isinstance(elem, float):
        return leaf(np.asarray(batch, dtype=np.float32))
    if isinstance(elem, (str, bytes)) or elem is None:
        return list(batch)
    if isinstance(elem, Mapping):
        return {k: _collate([d[k] for d in batch], leaf, tensors) for k in elem}
    if isinstance(elem, (tuple, list)):
        size = len(elem)
        if any(len(s) != size for s in batch):
            raise RumusError(f"collate: samples hold sequences of different lengths {[len(s) for s in batch]}")
        fields = [_collate(list(group), leaf, tensors) for group in zip(*batch)]
        if hasattr(elem, "_fields"):  # namedtuple
            return type(elem)(*fields)
        return tuple(fields) if isinstance(elem, tuple) else fields
    raise RumusError(f"collate: cannot batch samples of type {type(elem).__name__}; pass collate_fn=")


def _same(a: np.ndarray) -> np.ndarray:
    return a


def numpy_collate(batch: Sequence[Any]) -> Any:
    """Stack samples into numpy arrays (Tensors are read to the host first)."""
    return _collate(batch, _same, tensors=False)


def as_tensors(tree: Any, device: Any = None) -> Any:
    """Every numpy array in a collated batch becomes a rumus Tensor (one copy into the backend)."""
    if isinstance(tree, np.ndarray):
        return host_tensor(tree, device)
    if isinstance(tree, tuple):
        items = [as_tensors(x, device) for x in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else tuple(items)
    if isinstance(tree, list):
        return [as_tensors(x, device) for x in tree]
    if isinstance(tree, dict):
        return {k: as_tensors(v, device) for k, v in tree.items()}
    return tree


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack Tensors, numpy arrays and numbers into rumus Tensors along a new first dimension."""
    if not batch:
        raise RumusError("collate: empty batch")
    return _collate(batch, host_tensor, tensors=True)

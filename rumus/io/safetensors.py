"""safetensors files through the `safetensors` package; writes are atomic (temporary file, then rename)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from rumus_contracts import DTypeError, FormatError, RumusError

from ..tensor import Tensor


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Write bytes to `path` so that a crash leaves either the old file or the new one, never half."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_file(tensors: Mapping[str, Tensor], path: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None) -> None:
    from safetensors.numpy import save
    arrays: dict[str, np.ndarray] = {}
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise RumusError(f"save_file: '{name}' is a {type(t).__name__}, not a Tensor")
        if t.dtype.is_packed or t.dtype.name == "bfloat16":
            raise DTypeError(f"save_file: '{name}' has dtype {t.dtype}, which safetensors through numpy cannot "
                             f"hold; convert it to float32 first")
        arrays[name] = np.asarray(t.numpy(), order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
    atomic_write(path, save(arrays, metadata=dict(metadata) if metadata else None))


def load_file(path: str | os.PathLike[str], device: Any = None) -> dict[str, Tensor]:
    from safetensors.numpy import load

    from .._creation import from_numpy
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise RumusError(f"cannot read {path}: {exc}") from None
    if len(data) < 8:
        raise FormatError(f"{path}: not a safetensors file (only {len(data)} bytes; the header length alone is 8)")
    try:
        arrays = load(data)
    except Exception as exc:  # safetensors raises its own error types for corrupt headers/data
        raise FormatError(f"{path}: corrupt safetensors file: {exc}") from None
    return {k: from_numpy(np.asarray(v, order="C"), device=device) for k, v in arrays.items()}

"""Host arrays -> rumus Tensors, the one place the data engine creates tensors."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumus_contracts import DType
from rumus_contracts.dtype import PLAIN_DTYPES, from_numpy_dtype

from .._creation import _device, from_host
from ..tensor import Tensor

# numpy dtype -> DType as a dict lookup: from_numpy_dtype goes through np.dtype(...).name, a
# Python-level property that costs about as much as the rest of a small tensor's creation.
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in PLAIN_DTYPES if d.name != "bfloat16"}


def host_tensor(array: np.ndarray, device: Any = None) -> Tensor:
    """A tensor with the array's dtype, shape and contents (one copy into the backend's memory).

    The reshape keeps 0-d arrays 0-d: the core's upload path currently returns them as shape (1,).
    """
    dtype = _BY_NUMPY.get(array.dtype) or from_numpy_dtype(array.dtype)
    t = from_host(array, dtype, _device(device))
    return t if t.shape == array.shape else t.reshape(array.shape)

"""Host arrays -> rumus Tensors, the one place the data engine creates tensors."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._creation import from_numpy
from ..tensor import Tensor


def host_tensor(array: np.ndarray, device: Any = None) -> Tensor:
    """A tensor with the array's dtype, shape and contents (one copy into the backend's memory).

    The reshape keeps 0-d arrays 0-d: the core's upload path currently returns them as shape (1,).
    """
    t = from_numpy(array, device)
    return t if t.shape == array.shape else t.reshape(array.shape)

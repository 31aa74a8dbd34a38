"""RUMUS's cast rule on host arrays (docs/ARCHITECTURE.md "Casts"), shared by copy_ and the copy kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtype import DType
from ..ops.memory import saturating_int


def convert(values: np.ndarray[Any, Any], target: DType) -> np.ndarray[Any, Any]:
    """`values` as `target` holds them: to bool is ``x != 0``; floats to integers truncate toward zero,
    saturate to the target's range and send NaN to 0; integers to a narrower integer wrap (as in C);
    everything else is numpy's conversion (floats round to nearest, overflow to inf).

    The result may be `values` itself when no conversion is needed; assign it into the output view.
    """
    if values.dtype == target.numpy:
        return values
    if target.is_bool:
        return np.asarray(values != 0)
    if target.is_integer and values.dtype.kind == "f":
        return saturating_int(values, np.dtype(target.numpy))
    return values.astype(target.numpy)

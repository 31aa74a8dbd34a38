"""Discrete and Box spaces with their own seeded generators."""

from __future__ import annotations

from typing import Any

import numpy as np


class Space:
    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.np_random = np.random.default_rng()

    def seed(self, seed: int | None = None) -> list[int | None]:
        self.np_random = np.random.default_rng(seed)
        return [seed]


class Discrete(Space):
    def __init__(self, n: int) -> None:
        super().__init__((), np.int64)
        self.n = n

    def sample(self) -> int:
        return int(self.np_random.integers(self.n))


class Box(Space):
    def __init__(self, low: Any, high: Any, shape: tuple[int, ...] | None = None, dtype: Any = np.float32) -> None:
        shape = shape if shape is not None else np.shape(low)
        super().__init__(tuple(shape), dtype)
        self.low = np.broadcast_to(np.asarray(low, dtype=dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=dtype), self.shape).copy()

    def sample(self) -> np.ndarray:
        low = np.where(np.isfinite(self.low), self.low, -1.0)
        high = np.where(np.isfinite(self.high), self.high, 1.0)
        return self.np_random.uniform(low, high, self.shape).astype(self.dtype)

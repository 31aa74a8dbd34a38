"""A paged KV cache: keys and values live in fixed-size blocks of one pool per layer; each sequence owns a
block table (its blocks in order), so memory is allocated a block at a time as a sequence grows and returned
whole when it finishes or is cancelled — no per-sequence max-length reservation, no fragmentation.

Token position p of a sequence lives in pool row `table[p // block_size] * block_size + p % block_size`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import rumus as rm
from rumus_contracts import Device, DType, RumusError

from .._indexing import index_select
from .._math import copy_into
from .._views import narrow
from ..tensor import Tensor


class OutOfBlocks(RumusError):
    """The pool has fewer free blocks than a sequence needs (the scheduler waits for some to free)."""


class BlockAllocator:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise RumusError(f"BlockAllocator: num_blocks and block_size must be > 0, got {num_blocks}, {block_size}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() hands out block 0 first

    @property
    def free(self) -> int:
        return len(self._free)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise OutOfBlocks(f"KV cache: {n} blocks wanted, {len(self._free)} free of {self.num_blocks}")
        return [self._free.pop() for _ in range(n)]

    def release(self, blocks: Sequence[int]) -> None:
        self._free.extend(reversed(blocks))


class BlockTable:
    """One sequence's blocks; `reserve(n)` makes room for n tokens in all."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator
        self.blocks: list[int] = []

    def can_reserve(self, tokens: int) -> bool:
        return self.allocator.blocks_for(tokens) - len(self.blocks) <= self.allocator.free

    def reserve(self, tokens: int) -> None:
        more = self.allocator.blocks_for(tokens) - len(self.blocks)
        if more > 0:
            self.blocks.extend(self.allocator.allocate(more))

    def slots(self, start: int, stop: int) -> np.ndarray:
        """Pool rows of positions start..stop-1."""
        p = np.arange(start, stop)
        bs = self.allocator.block_size
        return np.asarray(self.blocks, dtype=np.int64)[p // bs] * bs + p % bs

    def release(self) -> None:
        self.allocator.release(self.blocks)
        self.blocks = []


class KVPool:
    """Per layer one pool of shape [num_blocks * block_size, 2 * n_embd] on the device: a row holds a token's
    key and value side by side, as c_attn produces them, so storing a token is one copy per layer."""

    def __init__(self, n_layer: int, n_embd: int, allocator: BlockAllocator, dtype: DType, device: Device) -> None:
        rows = allocator.num_blocks * allocator.block_size
        self.allocator, self.n_embd = allocator, n_embd
        self.kv: list[Tensor] = [rm.zeros(rows, 2 * n_embd, dtype=dtype, device=device) for _ in range(n_layer)]

    def write_and_read(self, layer: int, kv: Tensor, write: np.ndarray, read: np.ndarray) -> tuple[Tensor, Tensor]:
        """Store kv [B, T, 2C] at pool rows write [B*T]; return keys and values [B, S, C] at rows read [B, S]."""
        src = kv.reshape(-1, kv.shape[-1])
        pool = self.kv[layer]
        # in place, one copy per run of consecutive rows (a block of a prefill, a row per decoding sequence):
        # an advanced-index assignment would rewrite the whole pool every step
        for at, dst, n in _runs(write):
            copy_into(narrow(pool, 0, dst, n), narrow(src, 0, at, n))
        rows = rm.tensor(read.reshape(-1), device=kv.device)
        both = index_select(pool, 0, rows).reshape(*read.shape, 2 * self.n_embd)
        return narrow(both, 2, 0, self.n_embd), narrow(both, 2, self.n_embd, self.n_embd)


def _runs(rows: np.ndarray) -> list[tuple[int, int, int]]:
    """(source offset, first pool row, length) of each run of consecutive pool rows."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [rows.size]])
    return [(int(a), int(rows[a]), int(b - a)) for a, b in zip(starts, ends)]

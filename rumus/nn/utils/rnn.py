"""Variable-length sequences for the recurrent layers (torch.nn.utils.rnn's names and layouts).

A PackedSequence holds the time steps of a batch sorted by length, longest first, back to back:
`data` has sum(lengths) rows, `batch_sizes[t]` says how many sequences are still running at step t.
Lengths are host data (PyTorch keeps them on the CPU too), so the bookkeeping is numpy; the tensors
move through core ops (index_select, cat), so gradients flow through packing and padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rumus_contracts import RumusError, ShapeError

from ... import _creation
from ... import _math as M
from ...tensor import Tensor


class PackedSequence(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


def _lengths(lengths: Any) -> np.ndarray:
    arr = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if arr.size and arr.min() <= 0:
        raise RumusError(f"pack_padded_sequence: every length must be >= 1, got {arr.tolist()}")
    return arr


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    lens = _lengths(lengths)
    x = input.transpose(0, 1) if batch_first else input
    if lens.size != x.shape[1]:
        raise ShapeError(f"pack_padded_sequence: {lens.size} lengths for a batch of {x.shape[1]}")
    if int(lens.max()) > x.shape[0]:
        raise ShapeError(f"pack_padded_sequence: a length of {int(lens.max())} in a padded input of only "
                         f"{x.shape[0]} steps")
    sorted_idx: Tensor | None = None
    unsorted_idx: Tensor | None = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RumusError("pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
                             "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                             "pack_padded_sequence and/or pack_sequence to sidestep this requirement")
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx = _creation.tensor(order.tolist(), dtype="int64", device=x.device)
        unsorted_idx = _creation.tensor(np.argsort(order).tolist(), dtype="int64", device=x.device)
        lens = lens[order]
        x = x.index_select(1, sorted_idx)
    batch_sizes = [int((lens > t).sum()) for t in range(int(lens[0]))]
    data = M.cat([x[t, :n] for t, n in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _creation.tensor(batch_sizes, dtype="int64", device="cpu"), sorted_idx,
                          unsorted_idx)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    data = sequence.data
    sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    batch, steps = sizes[0], len(sizes)
    if total_length is not None and total_length < steps:
        raise ValueError(f"Expected total_length to be at least the length of the longest sequence ({steps}), "
                         f"got {total_length}")
    rows, offset = [], 0
    tail = tuple(data.shape[1:])
    for n in sizes:
        chunk = data[offset:offset + n]
        offset += n
        if n < batch:
            chunk = M.cat([chunk, _creation.full((batch - n, *tail), padding_value, dtype=data.dtype,
                                                 device=data.device)], 0)
        rows.append(chunk)
    for _ in range((total_length or steps) - steps):
        rows.append(_creation.full((batch, *tail), padding_value, dtype=data.dtype, device=data.device))
    padded = M.stack(rows, 0)
    lens = np.array([sum(1 for n in sizes if n > b) for b in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lens = lens[np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64)]
    out = padded.transpose(0, 1) if batch_first else padded
    return out, _creation.tensor(lens.tolist(), dtype="int64", device="cpu")


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    if not sequences:
        raise RumusError("pad_sequence: got an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        pad = _creation.full((longest - s.shape[0], *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
        padded.append(M.cat([s, pad] if padding_side == "right" else [pad, s], 0) if s.shape[0] < longest else s)
    return M.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence"]

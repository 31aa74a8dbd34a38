"""RecordDataset: a `.rrec` file as a map-style dataset of (input, target) tensors."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rumus_contracts import float32

from .._creation import _device, from_host
from ..tensor import Tensor
from .dataset import Dataset
from .rrec_reader import RecordFile, RecordLayout


class RecordDataset(Dataset):
    """`ds[i] -> (input, target)` float32 Tensors read from a memory-mapped `.rrec` file.

    O(1) random access through the index; the header and index are validated at open and each
    record when it is read (FormatError otherwise). `get_numpy(i)` returns the same sample as numpy
    arrays without copying float32 data (read-only views into the map); tensors copy once into the
    backend's memory. `close()` (or `with`) releases the map.
    """

    def __init__(self, path: str | os.PathLike[str], device: Any = None) -> None:
        self.file = RecordFile(path)
        self.path = self.file.path
        self.device = device

    def __len__(self) -> int:
        return len(self.file)

    def get_numpy(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.file.arrays(index)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        x, y = self.file.arrays(index)
        dev = _device(self.device)
        return from_host(x, float32, dev), from_host(y, float32, dev)

    def layout(self, index: int) -> RecordLayout:
        """Shapes, dtypes and byte offsets of record `index` (its data is not read)."""
        return self.file.layout(index)

    def verify(self) -> int:
        """Check every record (FormatError on the first defect); returns the record count."""
        return self.file.verify()

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> RecordDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        # a map cannot be pickled; spawned DataLoader workers reopen the file by path
        return (RecordDataset, (self.path, self.device))

    def __repr__(self) -> str:
        return f"RecordDataset({self.path!r}, {'closed' if self.file.closed else f'{len(self)} records'})"

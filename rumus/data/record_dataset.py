"""RecordDataset: a `.rrec` file as a map-style dataset of (input, target) tensors."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from ._tensors import host_tensor
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

    def get_numpy_batch(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Stacked (inputs, targets) of many records: what the DataLoader's default collate builds."""
        return self.file.batch(indices)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        x, y = self.file.arrays(index)
        return host_tensor(x, self.device), host_tensor(y, self.device)

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

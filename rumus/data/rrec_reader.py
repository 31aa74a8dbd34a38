"""RecordFile: the numpy-level `.rrec` reader over stdlib mmap (no backend needed).

Validation is lazy but complete: the header and the whole index are checked at open (vectorised,
O(num_records) without touching the data pages); each record's two blocks are checked when that
record is read. Every defect raises FormatError naming the problem and its byte offset; no read
ever goes past a bound that was not checked first.
"""

from __future__ import annotations

import math
import mmap
import operator
import os
import struct
from dataclasses import dataclass

import numpy as np

from rumus_contracts import FormatError, RumusError

from .rrec_format import (
    DTYPE_NAMES, FLOAT16, HEADER, HEADER_SIZE, INDEX_ENTRY, MAGIC, MAX_NDIM, RESERVED, TAG_DTYPES, U32, VERSION,
    padded,
)

_F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class BlockLayout:
    """One tensor block; `data` and `end` are relative to the start of its record."""

    shape: tuple[int, ...]
    tag: int
    data: int
    nbytes: int
    end: int

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.tag]


@dataclass(frozen=True)
class RecordLayout:
    offset: int
    length: int
    input: BlockLayout
    target: BlockLayout


class RecordFile:
    """An open `.rrec` file: `len(f)`, `f.arrays(i) -> (input, target)` numpy arrays, `f.layout(i)`.

    float32 arrays are zero-copy read-only views into the map (they keep it alive after close());
    float16 data is widened to a new float32 array.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._mm: mmap.mmap | None = None
        self._index: np.ndarray | None = None
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < HEADER_SIZE:
                raise FormatError(f"{self.path}: file too small: {size} bytes, but the header alone is "
                                  f"{HEADER_SIZE} bytes (the file ends at byte {size})")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.file_size = len(self._mm)
        try:
            self.num_records, self.index_offset = self._check_header()
            self._index = self._check_index()
        except BaseException:
            self.close()
            raise

    # ---- open-time validation ----------------------------------------------------------------------
    def _fail(self, problem: str) -> FormatError:
        return FormatError(f"{self.path}: {problem}")

    def _check_header(self) -> tuple[int, int]:
        mm, size = self._map(), self.file_size
        magic, version, n, index_offset = HEADER.unpack_from(mm, 0)
        if magic != MAGIC:
            raise self._fail(f"bad magic {magic!r} at byte 0 (expected {MAGIC!r}): not a .rrec file")
        if version != VERSION:
            raise self._fail(f"unsupported version {version} at byte 4 (this reader knows version {VERSION})")
        reserved = mm[RESERVED]
        if any(reserved):
            at = RESERVED.start + next(i for i, b in enumerate(reserved) if b)
            raise self._fail(f"non-zero reserved header byte at byte {at} (bytes 24..63 must be zero)")
        if index_offset < HEADER_SIZE:
            raise self._fail(f"index offset {index_offset} (header byte 16) points into the header")
        if index_offset > size:
            raise self._fail(f"index offset {index_offset} (header byte 16) lies beyond the end of the file "
                             f"({size} bytes)")
        index_end = index_offset + INDEX_ENTRY.size * n
        if index_end > size:
            raise self._fail(f"index of {n} records ({INDEX_ENTRY.size} bytes each, from byte {index_offset}) runs "
                             f"beyond the end of the file at byte {size}: truncated file or bad record count "
                             f"(header byte 8)")
        if index_end < size:
            raise self._fail(f"{size - index_end} stray bytes after the index, from byte {index_end} "
                             f"(the index must end the file)")
        return n, index_offset

    def _check_index(self) -> np.ndarray:
        n, io = self.num_records, self.index_offset
        flat = np.frombuffer(self._map(), dtype="<u8", count=2 * n, offset=io)
        if n == 0:
            if io != HEADER_SIZE:
                raise self._fail(f"no records but the index starts at byte {io}: {io - HEADER_SIZE} stray bytes "
                                 f"from byte {HEADER_SIZE}")
            return flat
        off, ln = flat[0::2], flat[1::2]

        def first(bad: np.ndarray) -> int | None:
            hits = np.flatnonzero(bad)
            return int(hits[0]) if hits.size else None

        def entry(i: int) -> str:
            return (f"record {i} (offset {int(off[i])}, length {int(ln[i])}; index entry at byte "
                    f"{io + INDEX_ENTRY.size * i})")

        if (i := first(off < HEADER_SIZE)) is not None:
            raise self._fail(f"{entry(i)} points into the header")
        if (i := first((off > io) | (ln > io - np.minimum(off, io)))) is not None:
            where = "beyond the end of the file" if int(off[i]) + int(ln[i]) > self.file_size else "into the index"
            raise self._fail(f"{entry(i)} runs {where} (the data region ends at byte {io})")
        if (i := first(ln % 4 != 0)) is not None:
            raise self._fail(f"{entry(i)} has a length that is not a multiple of 4")
        # the writer lays records end to end from byte 64; anything else is a corrupt index
        starts = np.empty_like(off)
        starts[0] = HEADER_SIZE
        np.add(off[:-1], ln[:-1], out=starts[1:])
        if (i := first(off != starts)) is not None:
            raise self._fail(f"{entry(i)} does not start where the previous record ends (byte {int(starts[i])})")
        last_end = int(off[-1]) + int(ln[-1])
        if last_end != io:
            raise self._fail(f"the last record ends at byte {last_end} but the index starts at byte {io}")
        return flat

    # ---- records -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.num_records

    def _map(self) -> mmap.mmap:
        if self._mm is None:
            raise RumusError(f"{self.path}: the record file is closed")
        return self._mm

    def _locate(self, index: int) -> tuple[int, int, int]:
        i = operator.index(index)
        n = self.num_records
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record {index} is out of range for a file of {n} records")
        flat = self._index
        if flat is None:
            raise RumusError(f"{self.path}: the record file is closed")
        return i, flat.item(2 * i), flat.item(2 * i + 1)

    def layout(self, index: int) -> RecordLayout:
        """Parse and check record `index`'s two block headers (and padding) without reading the data."""
        i, off, length = self._locate(index)
        mm, end = self._map(), off + length
        x = self._block(mm, off, off, end, i, "input")
        y = self._block(mm, off, off + x.end, end, i, "target")
        if y.end != length:
            raise self._fail(f"record {i}: {length - y.end} stray bytes after the target block, from byte "
                             f"{off + y.end} (the record ends at byte {end})")
        return RecordLayout(off, length, x, y)

    def arrays(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(input, target) as numpy arrays: float32 views into the map, float16 widened to float32."""
        rec = self.layout(index)
        mm = self._map()
        return _array(mm, rec.offset, rec.input), _array(mm, rec.offset, rec.target)

    def _block(self, mm: mmap.mmap, rec_off: int, pos: int, end: int, i: int, which: str) -> BlockLayout:
        what = f"record {i}: {which} block at byte {pos}"
        if end - pos < 8:
            raise self._fail(f"{what} is truncated: {end - pos} bytes left in the record, a block header needs "
                             f"at least 8")
        (ndim,) = U32.unpack_from(mm, pos)
        header = 4 * (ndim + 2)
        if header > end - pos:
            raise self._fail(f"{what} claims {ndim} dimensions, whose header ({header} bytes) runs past the record "
                             f"end at byte {end}")
        if ndim > MAX_NDIM:
            raise self._fail(f"{what} claims {ndim} dimensions; at most {MAX_NDIM} are supported")
        shape = struct.unpack_from(f"<{ndim}I", mm, pos + 4)
        (tag,) = U32.unpack_from(mm, pos + 4 + 4 * ndim)
        dtype = TAG_DTYPES.get(tag)
        if dtype is None:
            raise self._fail(f"record {i}: unknown dtype tag {tag} at byte {pos + 4 + 4 * ndim} in the {which} "
                             f"block (known: {', '.join(f'{t} = {n}' for t, n in DTYPE_NAMES.items())})")
        data = pos + header
        nbytes = math.prod(shape) * dtype.itemsize
        stored = padded(nbytes)
        if stored > end - data:
            raise self._fail(f"{what} is truncated: shape {list(shape)} of {DTYPE_NAMES[tag]} needs {nbytes} bytes "
                             f"from byte {data}, but the record ends at byte {end}")
        if stored != nbytes and any(mm[data + nbytes:data + stored]):
            raise self._fail(f"{what}: non-zero padding at byte {data + nbytes}")
        return BlockLayout(tuple(shape), tag, data - rec_off, nbytes, data + stored - rec_off)

    def verify(self) -> int:
        """Check every record's blocks (a full scan of the headers); returns the record count."""
        for i in range(self.num_records):
            self.layout(i)
        return self.num_records

    # ---- lifetime ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the map. Arrays already handed out keep it alive until they are gone."""
        mm, self._mm, self._index = self._mm, None, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # views exported by arrays(): the mapping goes away with the last of them

    @property
    def closed(self) -> bool:
        return self._mm is None

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.num_records} records"
        return f"RecordFile({self.path!r}, {state})"


def _array(mm: mmap.mmap, rec_off: int, b: BlockLayout) -> np.ndarray:
    dtype = TAG_DTYPES[b.tag]
    arr = np.frombuffer(mm, dtype=dtype, count=b.nbytes // dtype.itemsize, offset=rec_off + b.data).reshape(b.shape)
    return arr.astype(_F32) if b.tag == FLOAT16 else arr

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rumus_contracts import FormatError, RumusError, ShapeError

from .rrec_format import (
    BOOL, DTYPE_NAMES, FLOAT16, HEADER, HEADER_SIZE, INDEX_ENTRY, MAGIC, MAX_NDIM, RESERVED, TAG_DTYPES, U32, VERSION,
    padded,
)

_F32 = np.dtype(np.float32)


def _finish(arr: np.ndarray, tag: int) -> np.ndarray | None:
    """The array a block's raw view stands for: float16 widened to float32, bool bytes as bools; None when a
    bool block holds a byte other than 0 or 1 (the caller raises the FormatError naming the record)."""
    if tag == FLOAT16:
        return arr.astype(_F32)
    if tag == BOOL:
        return arr.view(np.bool_) if not (arr > 1).any() else None
    return arr


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


class _FastPath:
    """Reads every record laid out like `rec` (the first record read); None means "not like it".

    Equal length and equal header (and padding) bytes mean an identical parse, so comparing a few
    bytes is still a complete check, and it replaces ~20 struct calls. A record that passed is
    remembered in `checked`. When all records share one length (checked at open), `xs`/`ys` are
    strided views over every record's data: record i is `xs[i], ys[i]`, as with a numpy memmap, and
    a batch is one fancy-indexing gather after one vectorised header comparison.
    """

    def __init__(self, mm: mmap.mmap, rec: RecordLayout, flat: np.ndarray, uniform: int | None, n: int) -> None:
        x, y = rec.input, rec.target
        ranges = [(0, x.data), (x.data + x.nbytes, y.data), (y.data + y.nbytes, y.end)]
        # x's header; x's padding + y's header (adjacent); y's padding
        checks = tuple((a, b, mm[rec.offset + a:rec.offset + b]) for a, b in ranges if b > a)
        length, tag_x, tag_y = rec.length, x.tag, y.tag
        plain_x, plain_y = tag_x not in (FLOAT16, BOOL), tag_y not in (FLOAT16, BOOL)
        checked = bytearray(n)
        xs = _strided(mm, x, uniform, n) if uniform else None
        ys = _strided(mm, y, uniform, n) if uniform else None
        self.uniform, self.checks, self.xs, self.ys = uniform, checks, xs, ys
        self.checked = np.frombuffer(checked, np.uint8)  # shares memory with `checked`
        self.tags = tag_x, tag_y

        def read(index: int) -> tuple[np.ndarray, np.ndarray] | None:
            # a closure: this runs once per sample, and local names are the cheapest lookups
            i = index if index.__class__ is int else operator.index(index)
            if i < 0:
                i += n
            if not 0 <= i < n:
                return None
            off = HEADER_SIZE + i * length if uniform else flat.item(2 * i)
            if not checked[i]:
                if not uniform and flat.item(2 * i + 1) != length:
                    return None
                for a, b, want in checks:
                    if mm[off + a:off + b] != want:
                        return None
                checked[i] = 1
            if xs is not None and ys is not None:
                xa, ya = xs[i], ys[i]
            else:
                xa, ya = _view(mm, off, x), _view(mm, off, y)
            if plain_x and plain_y:
                return xa, ya
            fx, fy = _finish(xa, tag_x), _finish(ya, tag_y)
            return None if fx is None or fy is None else (fx, fy)  # None: the full parse names the defect

        self.read = read

    def gather(self, mm: mmap.mmap, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Stacked (inputs, targets) of in-range indices `idx`, or None when some record differs."""
        if self.xs is None or self.ys is None or self.uniform is None:
            return None
        todo = idx[self.checked[idx] == 0]
        if todo.size:
            for a, b, want in self.checks:
                got = np.ndarray((len(self.checked), b - a), np.uint8, buffer=mm, offset=HEADER_SIZE + a,
                                 strides=(self.uniform, 1))[todo]
                if not (got == np.frombuffer(want, np.uint8)).all():
                    return None
            self.checked[todo] = 1
        fx, fy = _finish(self.xs[idx], self.tags[0]), _finish(self.ys[idx], self.tags[1])
        return None if fx is None or fy is None else (fx, fy)


def _strided(mm: mmap.mmap, b: BlockLayout, length: int, n: int) -> np.ndarray:
    dtype = TAG_DTYPES[b.tag]
    inner = [dtype.itemsize] * len(b.shape)
    for k in range(len(b.shape) - 2, -1, -1):
        inner[k] = inner[k + 1] * max(b.shape[k + 1], 1)
    return np.ndarray((n, *b.shape), dtype, buffer=mm, offset=HEADER_SIZE + b.data, strides=(length, *inner))


class RecordFile:
    """An open `.rrec` file: `len(f)`, `f.arrays(i) -> (input, target)` numpy arrays, `f.layout(i)`.

    float32 arrays are zero-copy read-only views into the map (they keep it alive after close());
    float16 data is widened to a new float32 array. Records are independent: a corrupt record
    raises FormatError when read and leaves the others readable. The file must not be truncated or
    rewritten in place while mapped (the OS would fault on the missing pages); RecordWriter replaces
    a file by renaming a new one over it, which leaves open readers on the old contents.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._mm: mmap.mmap | None = None
        self._index: np.ndarray | None = None
        self._fast: _FastPath | None = None
        self._uniform: int | None = None  # the common record length, when every record has the same
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
        if (ln == ln[0]).all():
            self._uniform = int(ln[0])  # then record i starts at byte 64 + i * length
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
        """(input, target) as numpy arrays: views into the map, float16 widened to float32, bools checked."""
        fast = self._fast
        if fast is not None:
            got = fast.read(index)
            if got is not None:
                return got
        rec = self.layout(index)  # the full parse: raises the precise FormatError or IndexError
        mm = self._map()
        if self._fast is None and self._index is not None:
            self._fast = _FastPath(mm, rec, self._index, self._uniform, self.num_records)
        x, y = _finish(_view(mm, rec.offset, rec.input), rec.input.tag), _finish(_view(mm, rec.offset, rec.target),
                                                                                  rec.target.tag)
        if x is None or y is None:
            which, b = ("input", rec.input) if x is None else ("target", rec.target)
            raise self._fail(f"record {self._locate(index)[0]}: the {which} block of bools at byte "
                             f"{rec.offset + b.data} holds a byte other than 0 or 1")
        return x, y

    def batch(self, indices: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) of the records `indices`, stacked along a new first axis (new arrays).

        Equal to stacking `arrays(i)` one by one; on a file whose records share one layout it is a
        single vectorised header check and one gather.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = self.num_records
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(f"record {int(idx[bad][0])} is out of range for a file of {n} records")
        idx = np.where(idx < 0, idx + n, idx)
        if self._fast is None and idx.size:
            self.arrays(int(idx[0]))  # learns the common layout from the first record
        fast, mm = self._fast, self._map()
        got = fast.gather(mm, idx) if fast is not None and idx.size else None
        if got is not None:
            return got
        pairs = [self.arrays(int(i)) for i in idx]
        if not pairs:
            raise RumusError("batch() needs at least one index")
        for k in (0, 1):
            shapes = {p[k].shape for p in pairs}
            if len(shapes) > 1:
                raise ShapeError(f"{self.path}: the {('inputs', 'targets')[k]} of records {idx.tolist()} have "
                                 f"different shapes {sorted(shapes)}; they cannot be stacked into one batch")
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])

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
        if math.prod(d or 1 for d in shape) * dtype.itemsize >= 1 << 62:
            # a zero dim makes the block empty, but numpy cannot hold the other sizes: they overflow
            raise self._fail(f"{what}: shape {list(shape)} at byte {pos + 4} overflows the addressable size")
        if stored != nbytes and any(mm[data + nbytes:data + stored]):
            raise self._fail(f"{what}: non-zero padding at byte {data + nbytes}")
        return BlockLayout(tuple(shape), tag, data - rec_off, nbytes, data + stored - rec_off)

    def verify(self) -> int:
        """Check every record's blocks (a full scan of the headers, and of the bytes of bool blocks); returns
        the record count."""
        for i in range(self.num_records):
            rec = self.layout(i)
            if BOOL in (rec.input.tag, rec.target.tag):
                self.arrays(i)
        return self.num_records

    # ---- lifetime ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the map. Arrays already handed out keep it alive until they are gone."""
        mm, self._mm, self._index, self._fast = self._mm, None, None, None
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


def _view(mm: mmap.mmap, rec_off: int, b: BlockLayout) -> np.ndarray:
    dtype = TAG_DTYPES[b.tag]
    return np.frombuffer(mm, dtype=dtype, count=b.nbytes // dtype.itemsize, offset=rec_off + b.data).reshape(b.shape)



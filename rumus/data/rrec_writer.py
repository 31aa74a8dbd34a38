"""RecordWriter: streams records to a temporary file and renames it into place on finish().

A crash or an exception inside `with RecordWriter(...)` never leaves a half-written file under the
final name: until finish() the bytes live in `.<name>.tmp-<pid>-<random>` next to the target (same
filesystem, so the final os.replace is atomic); the temp is removed on any exception and a killed
writer's temp is swept by the next successful save of the same file (rumus.io.files.AtomicFile).
"""

from __future__ import annotations

import os
from array import array
from types import TracebackType
from typing import Any

import numpy as np

from rumus_contracts import DTypeError, RumusError

from ..io.files import AtomicFile
from ..tensor import Tensor
from .rrec_format import BOOL, FLOAT16, FLOAT32, HEADER, HEADER_SIZE, INT64, INT_TAGS, MAGIC, MAX_NDIM, TAG_DTYPES
from .rrec_format import U32_MAX, VERSION, block_header, padded


class RecordWriter:
    """Write `.rrec` files: `append(input, target)` per record, then `finish()`.

    Inputs and targets are rumus Tensors, numpy arrays or numbers. float32 and float16 are stored
    as they are; float64/bfloat16 become float32. Integers keep their type (int8, uint8, int16, int32,
    int64; uint16 and uint32 widen to int32 and int64, uint64 to int64 when its values fit) and bools
    stay bools, so class labels read back as int64. `float16=True` stores floating tensors as float16.
    Quantized and fixed-point tensors are refused: the format has no tag for them.
    """

    def __init__(self, path: str | os.PathLike[str], float16: bool = False) -> None:
        self.path = os.fspath(path)
        self._float16 = float16
        self._atomic = AtomicFile(self.path)
        self._file: Any = self._atomic.file
        self._file.write(bytes(HEADER_SIZE))  # zeros now; finish() patches the counts in
        self._pos = HEADER_SIZE
        self._index = array("Q")  # offset, length, offset, length, ...
        self._state = "open"

    def __len__(self) -> int:
        return len(self._index) // 2

    def append(self, input: Any, target: Any) -> None:  # noqa: A002  (PyTorch-style name)
        if self._state != "open":
            raise RumusError(f"RecordWriter({self.path!r}) is {self._state}; open a new writer to add records")
        blocks = [self._encode(input, "input"), self._encode(target, "target")]
        start = self._pos
        for header, data, pad in blocks:
            self._file.write(header)
            self._file.write(data)
            self._file.write(pad)
            self._pos += len(header) + data.nbytes + len(pad)
        self._index.append(start)
        self._index.append(self._pos - start)

    def finish(self) -> None:
        """Write the index, patch the header, fsync and rename into place. A second call does nothing."""
        if self._state == "finished":
            return
        if self._state != "open":
            raise RumusError(f"RecordWriter({self.path!r}) was discarded; nothing to finish")
        try:
            index = np.frombuffer(self._index, dtype=np.uint64).astype("<u8")
            self._file.write(index.tobytes())
            self._file.seek(0)
            self._file.write(HEADER.pack(MAGIC, VERSION, len(self), self._pos))
            self._atomic.commit()  # fsync, rename into place, fsync the directory, sweep stale temps
        except BaseException:
            self.discard()
            raise
        self._state = "finished"

    def discard(self) -> None:
        """Drop everything written so far; the final path is left untouched."""
        if self._state == "finished":
            return
        self._state = "discarded"
        self._atomic.discard()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.discard()
    # No __del__: a writer dropped mid-way is never finished; its AtomicFile's __del__ removes the temp.

    # ---- encoding ----------------------------------------------------------------------------------
    def _encode(self, value: Any, what: str) -> tuple[bytes, np.ndarray, bytes]:
        arr = _host_array(value, what)
        if arr.ndim > MAX_NDIM:
            raise RumusError(f"RecordWriter: the {what} has {arr.ndim} dimensions; .rrec readers accept at most "
                             f"{MAX_NDIM}")
        if any(d > U32_MAX for d in arr.shape):
            raise RumusError(f"RecordWriter: the {what} has shape {arr.shape}; every dimension must fit in a u32")
        tag = self._tag_for(arr, what)
        data = np.ascontiguousarray(arr, dtype=TAG_DTYPES[tag])
        return block_header(arr.shape, tag), data, bytes(padded(data.nbytes) - data.nbytes)

    def _tag_for(self, arr: np.ndarray, what: str) -> int:
        kind = arr.dtype.kind
        if kind == "f":
            return FLOAT16 if self._float16 or arr.dtype == np.float16 else FLOAT32
        if kind == "b":
            return BOOL
        if arr.dtype.newbyteorder("=") in INT_TAGS:
            return INT_TAGS[arr.dtype.newbyteorder("=")]
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            if arr.size and int(arr.max()) >= 2**63:
                raise DTypeError(f"RecordWriter: the {what} is uint64 with values of 2**63 and more, beyond int64 "
                                 f"(the widest integer type of .rrec)")
            return INT64
        raise DTypeError(f"RecordWriter: the {what} has numpy dtype {arr.dtype}; .rrec stores float32/float16, "
                         f"int8/uint8/int16/int32/int64 and bool, not {arr.dtype}")


def _host_array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, Tensor):
        dt = value.dtype
        if dt.is_fixed:
            raise DTypeError(f"RecordWriter: the {what} is a fixed-point tensor ({dt}); .rrec stores float32/float16 "
                             f"only, so fixed-point data cannot be written - convert it to float32 first")
        if dt.is_packed:
            raise DTypeError(f"RecordWriter: the {what} is a quantized tensor ({dt}); .rrec stores float32/float16 "
                             f"only - dequantize it first")
        return value.numpy()  # layout-aware: a view gives its logical contents, not its raw storage
    if isinstance(value, np.ndarray):
        return value
    arr = np.asarray(value)
    if arr.dtype == object:
        raise RumusError(f"RecordWriter: cannot store the {what} of type {type(value).__name__}")
    return arr


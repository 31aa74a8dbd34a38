"""The `.rrec` byte layout (SPEC B), little-endian throughout; the writer and the reader share it.

    header  64 B   b"RREC" | u32 version=1 | u64 num_records | u64 index_offset | 40 zero bytes
    data           records from byte 64: input block then target block
    block          u32 ndim | ndim x u32 dims | u32 dtype tag | raw data | zero padding to 4 B
    index          at index_offset: num_records x (u64 record offset, u64 record length)

dtype tags: 0 float32, 1 float16 (SPEC B), and for integer and boolean data 2 int8, 3 uint8, 4 int16,
5 int32, 6 int64, 7 bool (one byte per element, 0 or 1; any other byte is a defect). A file whose blocks
are all float32/float16 is byte for byte what a reader of SPEC B alone expects; tags 8 and up are unknown.
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"RREC"
VERSION = 1
HEADER = struct.Struct("<4sIQQ40x")  # 64 bytes; the 40 trailing bytes must be zero
HEADER_SIZE = HEADER.size
RESERVED = slice(24, 64)
INDEX_ENTRY = struct.Struct("<QQ")
U32 = struct.Struct("<I")
U32_MAX = 2**32 - 1

# dtype tag -> little-endian numpy dtype of the raw data
# (bool's raw bytes are read as uint8 and checked to be 0 or 1 before they become numpy bools)
TAG_DTYPES: dict[int, np.dtype] = {0: np.dtype("<f4"), 1: np.dtype("<f2"), 2: np.dtype("i1"), 3: np.dtype("u1"),
                                   4: np.dtype("<i2"), 5: np.dtype("<i4"), 6: np.dtype("<i8"), 7: np.dtype("u1")}
DTYPE_NAMES = {0: "float32", 1: "float16", 2: "int8", 3: "uint8", 4: "int16", 5: "int32", 6: "int64", 7: "bool"}
FLOAT32, FLOAT16, INT8, UINT8, INT16, INT32, INT64, BOOL = range(8)
# numpy dtype of integer data -> its tag; unsigned types without a tag widen to the next signed one
INT_TAGS = {np.dtype("int8"): INT8, np.dtype("uint8"): UINT8, np.dtype("int16"): INT16, np.dtype("int32"): INT32,
            np.dtype("int64"): INT64, np.dtype("uint16"): INT32, np.dtype("uint32"): INT64}

# numpy 1.x arrays have at most 32 dimensions; a file must read everywhere, so the writer and the
# reader both hold to 32 even where numpy 2 would allow 64.
MAX_NDIM = 32


def padded(nbytes: int) -> int:
    """Round up to the 4-byte boundary every block ends on."""
    return (nbytes + 3) & ~3


def block_header(shape: tuple[int, ...], tag: int) -> bytes:
    return struct.pack(f"<I{len(shape)}II", len(shape), *shape, tag)

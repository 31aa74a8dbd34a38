"""The `.rrec` byte layout (SPEC B), little-endian throughout; the writer and the reader share it.

    header  64 B   b"RREC" | u32 version=1 | u64 num_records | u64 index_offset | 40 zero bytes
    data           records from byte 64: input block then target block
    block          u32 ndim | ndim x u32 dims | u32 dtype tag | raw data | zero padding to 4 B
    index          at index_offset: num_records x (u64 record offset, u64 record length)
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
TAG_DTYPES: dict[int, np.dtype] = {0: np.dtype("<f4"), 1: np.dtype("<f2")}
DTYPE_NAMES = {0: "float32", 1: "float16"}
FLOAT32, FLOAT16 = 0, 1

# numpy 1.x arrays have at most 32 dimensions; a file must read everywhere, so the writer and the
# reader both hold to 32 even where numpy 2 would allow 64.
MAX_NDIM = 32


def padded(nbytes: int) -> int:
    """Round up to the 4-byte boundary every block ends on."""
    return (nbytes + 3) & ~3


def block_header(shape: tuple[int, ...], tag: int) -> bytes:
    return struct.pack(f"<I{len(shape)}II", len(shape), *shape, tag)

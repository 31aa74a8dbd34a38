"""Regression: a block whose dims include 0 next to dims whose product overflows (found by the fuzz test)."""

import struct

import pytest

from rumus import FormatError
from rumus.data import RecordDataset


def test_zero_dim_next_to_huge_dims_is_a_format_error(tmp_path):
    block_in = struct.pack("<I", 3) + struct.pack("<3I", 0, 0xFFFFFFFF, 0xFFFFFFFF) + struct.pack("<I", 0)
    block_out = struct.pack("<I", 1) + struct.pack("<I", 1) + struct.pack("<I", 0) + struct.pack("<f", 1.0)
    record = block_in + block_out
    index_offset = 64 + len(record)
    header = b"RREC" + struct.pack("<IQQ", 1, 1, index_offset) + b"\0" * 40
    path = tmp_path / "overflow.rrec"
    path.write_bytes(header + record + struct.pack("<QQ", 64, len(record)))
    with RecordDataset(str(path)) as ds, pytest.raises(FormatError, match="overflow"):
        ds[0]

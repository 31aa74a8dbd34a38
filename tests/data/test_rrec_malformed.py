"""Every malformed-file case raises FormatError naming the problem and the byte offset."""

import struct

import numpy as np
import pytest
from rrec_reference import build_file, encode_block

from rumus import FormatError
from rumus.data import RecordDataset, RecordFile
from rumus.data.cli import main as cli

X0, Y0 = encode_block(np.ones((2, 3), np.float32), 0), encode_block(np.array(5.0, np.float32), 0)  # 40 + 12 bytes
X1, Y1 = encode_block(np.array([1, 2, 3], np.float16), 1), encode_block(np.array([4.0], np.float32), 0)  # 20 + 16
GOOD = [(X0, Y0), (X1, Y1)]
R0, R1 = 64, 64 + 52            # record offsets
IO = R1 + 36                    # index offset
SIZE = IO + 32
assert (len(X0), len(Y0), len(X1), len(Y1)) == (40, 12, 20, 16)


def _u32(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}I", *v)


def _with_index_entry(i: int, off: int, ln: int) -> bytes:
    index = [(R0, 52), (R1, 36)]
    index[i] = (off, ln)
    return build_file(GOOD, index=index)


def _record1(block_x: bytes, block_y: bytes = Y1) -> bytes:
    return build_file([(X0, Y0), (block_x, block_y)])


# (id, file bytes, phrase in the message, byte offset in the message, problem found at open or at read)
CASES = [
    ("empty", b"", "too small", 0, "open"),
    ("too-small", build_file([])[:63], "too small", 63, "open"),
    ("bad-magic", b"RRFC" + build_file(GOOD)[4:], "bad magic", 0, "open"),
    ("version", build_file(GOOD, version=2), "unsupported version 2", 4, "open"),
    ("reserved", build_file(GOOD, reserved=bytes(16) + b"\x01" + bytes(23)), "reserved", 40, "open"),
    ("index-in-header", build_file(GOOD, index_offset=12), "index offset 12", 16, "open"),
    ("index-offset-beyond", build_file(GOOD, index_offset=SIZE + 8), "beyond the end of the file", 16, "open"),
    ("index-beyond-file", build_file(GOOD, num_records=3), "beyond the end of the file", SIZE, "open"),
    ("count-overflow", build_file(GOOD, num_records=2**64 - 1), "beyond the end of the file", SIZE, "open"),
    ("truncated-file", build_file(GOOD)[:-5], "truncated file", SIZE - 5, "open"),
    ("trailing-bytes", build_file(GOOD, tail=b"\x00" * 4), "stray bytes after the index", SIZE, "open"),
    ("record-in-header", _with_index_entry(0, 8, 52), "points into the header", IO, "open"),
    ("record-beyond-file", _with_index_entry(1, R1, 2**63), "beyond the end of the file", IO + 16, "open"),
    ("record-offset-beyond", _with_index_entry(1, 2**64 - 4, 36), "beyond the end of the file", IO + 16, "open"),
    ("record-into-index", _with_index_entry(1, R1, 40), "into the index", IO + 16, "open"),
    ("length-not-4", _with_index_entry(0, R0, 51), "not a multiple of 4", IO, "open"),
    ("records-out-of-order", build_file(GOOD, index=[(R1, 36), (R0, 52)]), "does not start where", IO, "open"),
    ("unknown-dtype-tag", _record1(_u32(1, 3, 8) + bytes(8)), "unknown dtype tag 8", R1 + 8, "read"),
    ("bool-byte-not-0-or-1", _record1(_u32(1, 3, 7) + b"\x01\x02\x00\x00"), "byte other than 0 or 1", R1 + 12,
     "read"),
    ("ndim-overflow", _record1(_u32(2**32 - 1) + bytes(16)), "claims 4294967295 dimensions", R1, "read"),
    ("ndim-too-many", _record1(_u32(33, *[1] * 33, 0) + bytes(4)), "at most 32", R1, "read"),
    ("sizes-overflow", _record1(_u32(3, 2**32 - 1, 2**32 - 1, 2**32 - 1, 0) + bytes(4)), "truncated", R1 + 20,
     "read"),
    ("truncated-data", _record1(_u32(1, 10, 0) + bytes(8), b""), "truncated", R1 + 12, "read"),
    ("missing-target", _record1(X1, b""), "target block at byte", R1 + 20, "read"),
    ("truncated-block-header", _record1(X1, _u32(2)), "truncated", R1 + 20, "read"),
    ("stray-bytes-in-record", _record1(X1, Y1 + bytes(4)), "stray bytes after the target block", R1 + 36, "read"),
    ("non-zero-padding", _record1(X1[:-2] + b"\x01\x00"), "non-zero padding", R1 + 18, "read"),
]


@pytest.mark.parametrize("data, phrase, offset, when", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_file_raises_format_error(tmp_path, data, phrase, offset, when):
    path = tmp_path / "bad.rrec"
    path.write_bytes(data)
    if when == "open":
        with pytest.raises(FormatError) as info:
            RecordDataset(path)
    else:
        with RecordDataset(path) as ds:
            assert len(ds) == 2
            assert ds.get_numpy(0)[0].shape == (2, 3)  # the good record still reads: validation is per record
            with pytest.raises(FormatError) as info:
                ds.get_numpy(1)
            with pytest.raises(FormatError):
                ds[1]
            with pytest.raises(FormatError):
                ds.verify()
    msg = str(info.value)
    assert phrase in msg and f"byte {offset}" in msg and str(path) in msg, msg
    # a damaged .rrec file fails the check (1); a file that is not one at all (no magic) is bad input (2)
    assert cli(["rrec", "verify", str(path)]) == (1 if data[:4] == b"RREC" else 2)


def test_good_file_of_the_cases_is_good(tmp_path):
    path = tmp_path / "good.rrec"
    path.write_bytes(build_file(GOOD))
    assert len(build_file(GOOD)) == SIZE
    with RecordFile(path) as f:
        assert f.verify() == 2 and f.index_offset == IO
        assert f.layout(1).offset == R1 and f.layout(1).length == 36 and f.layout(0).length == 52


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        RecordFile(tmp_path / "nope.rrec")

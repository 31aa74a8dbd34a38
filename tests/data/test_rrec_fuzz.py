"""Mutated and truncated files never crash, hang or read garbage.

Oracle: a truncated file fails at open (the index ends the file); a changed header or index byte
fails at open or on read; a changed byte inside record i leaves every other record exactly as
written, and record i reads exactly as an independent struct decoder (rrec_reference) reads those
bytes, or both reject it. (The format carries no checksum, so a flipped data byte is a valid value.)
"""

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from rrec_reference import build_file, decode_record, encode_block, same, time_limit

from rumus import FormatError, ShapeError
from rumus.data import RecordFile, RecordWriter

_DTYPES = {0: np.float32, 1: np.float16}


@st.composite
def blocks(draw):
    tag = draw(st.sampled_from([0, 1]))
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    return draw(hnp.arrays(_DTYPES[tag], shape))  # any bits: NaN, inf, -0.0 included


RECORDS = st.lists(st.tuples(blocks(), blocks()), min_size=1, max_size=4)
U32_VALUES = [0, 1, 2, 3, 4, 7, 32, 33, 255, 2**16, 2**31, 2**32 - 1]
U64_VALUES = [0, 4, 63, 64, 2**32, 2**63, 2**64 - 1]


def _written(path, records) -> tuple[bytes, list[tuple[int, int]]]:
    """The file bytes (RecordWriter's output, proven equal to build_file's in test_rrec_bytes) and the
    (offset, length) of every record. Hypothesis examples use build_file: no fsync per example."""
    if path is None:
        buf = build_file([(encode_block(x, int(x.dtype == np.float16)), encode_block(y, int(y.dtype == np.float16)))
                          for x, y in records])
    else:
        with RecordWriter(path) as w:
            for x, y in records:
                w.append(x, y)
        buf = path.read_bytes()
    n, io = struct.unpack_from("<QQ", buf, 8)
    return buf, [struct.unpack_from("<QQ", buf, io + 16 * i) for i in range(n)]


def _mutate(data, buf: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "byte", "u32", "u64"]))
    pos = data.draw(st.integers(0, len(buf) - 1))
    if kind == "truncate":
        return buf[:pos]
    if kind == "byte":
        return buf[:pos] + bytes([data.draw(st.integers(0, 255))]) + buf[pos + 1:]
    fmt, values = ("<I", U32_VALUES) if kind == "u32" else ("<Q", U64_VALUES)
    field = struct.pack(fmt, data.draw(st.sampled_from(values)))
    return (buf[:pos] + field + buf[pos + len(field):])[:len(buf)]


def check_reader(path, original: bytes, mutated: bytes, extents, records) -> None:
    """The property, for one mutated file already written at `path`."""
    changed = [k for k in range(min(len(original), len(mutated))) if original[k] != mutated[k]]
    try:
        f = RecordFile(path)
    except FormatError:
        return
    with f:
        assert len(mutated) == len(original), "a truncated file must fail at open"
        assert len(f) == len(records)
        data_start, data_end = extents[0][0], extents[-1][0] + extents[-1][1]
        assert all(data_start <= k < data_end for k in changed), "a header/index change must fail at open"
        for i, ((x, y), (off, ln)) in enumerate(zip(records, extents)):
            touched = any(off <= k < off + ln for k in changed)
            expected = decode_record(mutated, off, ln) if touched else (x, y)
            try:
                got = f.arrays(i)
            except FormatError:
                assert touched and expected is None, f"record {i} rejected although its bytes are valid"
                continue
            assert expected is not None, f"record {i} read although its bytes are invalid"
            assert same(got[0], expected[0]) and same(got[1], expected[1])
    check_batch(path, mutated, extents, records)


def check_batch(path, mutated: bytes, extents, records) -> None:
    """batch() on a fresh reader (so its vectorised check runs first) agrees with record-by-record reads."""
    expected = [decode_record(mutated, off, ln) for off, ln in extents]
    with RecordFile(path) as f:
        try:
            bx, by = f.batch(list(range(len(records)))[::-1])
        except FormatError:
            assert any(e is None for e in expected)
            return
        except ShapeError:
            assert len({(e[0].shape, e[1].shape) for e in expected}) > 1
            return
    assert all(e is not None for e in expected)
    assert same(bx, np.stack([e[0] for e in expected[::-1]])) and same(by, np.stack([e[1] for e in expected[::-1]]))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=RECORDS, data=st.data())
def test_mutated_or_truncated_files_never_read_garbage(workdir, records, data):
    buf, extents = _written(None, records)
    mutated = _mutate(data, buf)
    path = workdir / "mut.rrec"
    path.write_bytes(mutated)
    with time_limit(5):
        check_reader(path, buf, mutated, extents, records)


def test_every_single_byte_change_and_every_truncation(tmp_path):
    """Exhaustive over one small file: all truncation lengths, three values at every byte."""
    records = [(np.arange(3, dtype=np.float16), np.array(2.0, np.float32)),
               (np.ones((2, 1, 2), np.float32), np.zeros((0,), np.float32))]
    buf, extents = _written(tmp_path / "orig.rrec", records)
    path = tmp_path / "mut.rrec"
    with time_limit(20):
        for cut in range(len(buf)):
            path.write_bytes(buf[:cut])
            check_reader(path, buf, buf[:cut], extents, records)
        for pos in range(len(buf)):
            for value in {0, 0xFF, buf[pos] ^ 1}:
                mutated = buf[:pos] + bytes([value]) + buf[pos + 1:]
                path.write_bytes(mutated)
                check_reader(path, buf, mutated, extents, records)

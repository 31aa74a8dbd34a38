"""SPEC B byte for byte: hand-written files read by RecordDataset, RecordWriter files parsed by hand."""

import struct

import numpy as np
import pytest
from rrec_reference import build_file, decode_file, encode_block, same

import rumus as rm
from rumus.data import RecordDataset, RecordFile, RecordWriter

# 0-d, 1-d and 3-d shapes in both dtypes; float16 with an odd element count needs 2 bytes of padding
RECORDS = [
    (np.array(1.5, np.float32), 0, np.array([1.0, -2.0, 3.0], np.float32), 0),
    (np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7, 0, np.array(0.25, np.float16), 1),
    (np.array([1.0, 2.5, -3.0], np.float16), 1, np.arange(6, dtype=np.float16).reshape(1, 2, 3), 1),
    (np.zeros((2, 0, 3), np.float32), 0, np.array([], np.float16), 1),
]


def _hand_file() -> bytes:
    return build_file([(encode_block(x, tx), encode_block(y, ty)) for x, tx, y, ty in RECORDS])


def test_hand_written_file_reads_back(tmp_path):
    path = tmp_path / "hand.rrec"
    path.write_bytes(_hand_file())
    with RecordDataset(path) as ds:
        assert len(ds) == len(RECORDS)
        for i, (x, _, y, _) in enumerate(RECORDS):
            tx, ty = ds[i]
            assert isinstance(tx, rm.Tensor) and tx.dtype == rm.float32 and tx.device == rm.device("cpu")
            assert same(tx.numpy(), x) and same(ty.numpy(), y)  # float16 widened exactly to float32
            nx, ny = ds.get_numpy(i)
            assert nx.dtype == ny.dtype == np.float32 and same(nx, x) and same(ny, y)
        x, y = ds[-1]
        assert x.shape == (2, 0, 3) and y.shape == (0,)


def test_writer_output_is_exactly_the_hand_built_bytes(tmp_path):
    path = tmp_path / "w.rrec"
    with RecordWriter(path) as w:
        for x, _, y, _ in RECORDS:
            w.append(rm.tensor(x).reshape(x.shape), y)  # float16 tensors and arrays keep tag 1
    assert path.read_bytes() == _hand_file()


def test_writer_file_parsed_by_hand(tmp_path):
    path = tmp_path / "w.rrec"
    with RecordWriter(path) as w:
        w.append(np.array(2.0, np.float32), np.array([1, 2, 3], np.float16))   # 0-d f32, 1-d odd f16
        w.append(np.ones((2, 1, 3), np.float32), np.array(7.0, np.float16))     # 3-d f32, 0-d f16
    buf = path.read_bytes()
    magic, version, n, io = struct.unpack_from("<4sIQQ", buf, 0)
    assert (magic, version, n) == (b"RREC", 1, 2) and buf[24:64] == bytes(40)
    # record 0 at byte 64: input u32 ndim=0, tag 0, 4 data bytes; target ndim 1, dim 3, tag 1, 6 data + 2 pad
    assert struct.unpack_from("<II", buf, 64) == (0, 0)
    assert struct.unpack_from("<f", buf, 72) == (2.0,)
    assert struct.unpack_from("<III", buf, 76) == (1, 3, 1)
    assert np.frombuffer(buf[88:94], "<f2").tolist() == [1, 2, 3]
    assert buf[94:96] == b"\x00\x00"  # padding to 4 bytes
    len0 = 96 - 64
    # record 1: input ndim 3 dims 2,1,3 tag 0 + 24 bytes; target ndim 0 tag 1, 2 data + 2 pad
    assert struct.unpack_from("<IIIII", buf, 96) == (3, 2, 1, 3, 0)
    assert np.frombuffer(buf[116:140], "<f4").tolist() == [1.0] * 6
    assert struct.unpack_from("<II", buf, 140) == (0, 1)
    assert np.frombuffer(buf[148:150], "<f2").tolist() == [7.0] and buf[150:152] == b"\x00\x00"
    assert io == 152 and len(buf) == io + 32
    assert struct.unpack_from("<QQQQ", buf, io) == (64, len0, 96, 152 - 96)
    assert all(o % 4 == 0 and ln % 4 == 0 for o, ln in [(64, len0), (96, 56)])
    x, y = decode_file(buf)[1]
    assert same(x, np.ones((2, 1, 3))) and same(y, np.array(7.0))


def test_float32_arrays_are_zero_copy_views_and_close_releases_the_map(tmp_path):
    path = tmp_path / "z.rrec"
    with RecordWriter(path) as w:
        w.append(np.arange(4, dtype=np.float32), np.array([1, 2, 3], np.float16))
    f = RecordFile(path)
    x, y = f.arrays(0)
    assert not x.flags.writeable and not x.flags.owndata  # a view into the read-only map
    assert y.flags.owndata  # float16 had to be widened into a new array
    f.close()  # views still alive: the map lingers until they are gone, no error
    assert x.tolist() == [0, 1, 2, 3] and f.closed
    with pytest.raises(rm.RumusError, match="closed"):
        f.arrays(0)
    with RecordFile(path) as g:
        g.arrays(0)
    assert g.closed


def test_empty_file_and_index_errors(tmp_path):
    path = tmp_path / "e.rrec"
    RecordWriter(path).finish()
    assert path.read_bytes() == build_file([])
    with RecordFile(path) as f:
        assert len(f) == 0 and f.verify() == 0
        with pytest.raises(IndexError):
            f.arrays(0)


def test_batch_equals_stacking_the_records(tmp_path):
    path = tmp_path / "b.rrec"
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((9, 2, 3)).astype(np.float16)
    with RecordWriter(path) as w:
        for i, x in enumerate(xs):
            w.append(x, np.array([i], np.float32))
    with RecordFile(path) as f:
        idx = [4, 0, -1, 4]
        bx, by = f.batch(idx)
        assert bx.dtype == np.float32 and bx.shape == (4, 2, 3) and by[:, 0].tolist() == [4, 0, 8, 4]
        assert same(bx, np.stack([f.arrays(i)[0] for i in idx])) and same(bx, xs[[4, 0, 8, 4]])
        with pytest.raises(IndexError):
            f.batch([0, 9])
    mixed = tmp_path / "m.rrec"
    with RecordWriter(mixed) as w:
        w.append(np.zeros((2, 3)), np.zeros(1))
        w.append(np.zeros((3, 2)), np.zeros(1))  # same length, another shape: no shared layout
        w.append(np.ones((2, 3)), np.zeros(1))
    with RecordFile(mixed) as f:
        assert same(f.batch([2, 0])[0], np.stack([np.ones((2, 3)), np.zeros((2, 3))]))
        with pytest.raises(rm.ShapeError, match="different shapes"):
            f.batch([0, 1])
        assert f.arrays(1)[0].shape == (3, 2)


def test_a_corrupt_record_fails_batch_and_fast_reads(tmp_path):
    path = tmp_path / "c.rrec"
    with RecordWriter(path) as w:
        for i in range(6):
            w.append(np.full(3, i, np.float32), np.array(i, np.float32))
    data = bytearray(path.read_bytes())
    rec_len = 4 + 4 + 4 + 12 + 8 + 4
    data[64 + 4 * rec_len + 8] = 1  # record 4's input tag: float32 -> float16, its length no longer adds up
    path.write_bytes(bytes(data))
    with RecordFile(path) as f:
        assert f.arrays(0)[0].tolist() == [0, 0, 0]  # learns the common layout
        assert f.batch([0, 1, 2])[0][:, 0].tolist() == [0, 1, 2]
        with pytest.raises(rm.FormatError, match="record 4"):
            f.batch([3, 4])
        with pytest.raises(rm.FormatError, match="record 4"):
            f.arrays(4)
        assert f.arrays(5)[1].item() == 5

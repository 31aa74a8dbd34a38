"""RecordWriter: atomic creation, layout-aware writes, dtype conversions and refusals."""

import os

import numpy as np
import pytest
from rrec_reference import decode_file, same

import rumus as rm
from rumus import DTypeError, RumusError
from rumus.data import RecordDataset, RecordWriter
from rumus_contracts import fixed_i16, int4, q8


def _leftovers(directory) -> list[str]:
    return sorted(os.listdir(directory))


def test_no_final_file_until_finish(tmp_path):
    path = tmp_path / "data.rrec"
    w = RecordWriter(path)
    w.append(np.ones(3), np.zeros(1))
    assert not path.exists()
    tmp = _leftovers(tmp_path)
    # same directory, named after the target (issue 20: .<name>.tmp-<pid>-<random>, swept after a kill)
    assert len(tmp) == 1 and tmp[0].startswith(f".data.rrec.tmp-{os.getpid()}-")
    w.finish()
    assert _leftovers(tmp_path) == ["data.rrec"] and len(w) == 1
    w.finish()  # idempotent
    with pytest.raises(RumusError, match="finished"):
        w.append(np.ones(1), np.ones(1))


def test_exception_inside_with_leaves_no_file_and_keeps_an_old_one(tmp_path):
    path = tmp_path / "data.rrec"
    with pytest.raises(ValueError):
        with RecordWriter(path) as w:
            w.append(np.ones(3), np.zeros(1))
            raise ValueError("boom")
    assert _leftovers(tmp_path) == []
    with RecordWriter(path) as w:
        w.append(np.ones(2), np.ones(2))
    old = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        with RecordWriter(path) as w:
            w.append(np.zeros(5), np.zeros(5))
            raise KeyboardInterrupt
    assert path.read_bytes() == old and _leftovers(tmp_path) == ["data.rrec"]


def test_dropped_writer_and_discard_remove_the_temporary(tmp_path):
    w = RecordWriter(tmp_path / "a.rrec")
    w.append(np.ones(1), np.ones(1))
    del w
    w = RecordWriter(tmp_path / "b.rrec")
    w.discard()
    assert _leftovers(tmp_path) == []
    with pytest.raises(RumusError, match="discarded"):
        w.finish()


def test_views_are_written_by_their_logical_contents(tmp_path):
    base = rm.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    views = [base.T, base[:, 1], base.T[1:3], base.reshape(2, 6).T]
    arrays = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "views.rrec"
    with RecordWriter(path) as w:
        for v in views:
            assert not v.is_contiguous()
            w.append(v, arrays.T[::2])  # a strided numpy view too
    expected = [np.asarray(v.numpy()) for v in views]
    assert same(expected[0], arrays.T)
    for (x, y), e in zip(decode_file(path.read_bytes()), expected):
        assert same(x, e) and same(y, arrays.T[::2])


def test_dtype_conversions(tmp_path):
    path = tmp_path / "conv.rrec"
    with RecordWriter(path) as w:
        w.append(np.array([1.5, 2.25], np.float64), np.array([3, -7], np.int64))  # float64 -> float32; int64 kept
        w.append(rm.tensor([1.0, 2.0], dtype="bfloat16"), np.array([True, False]))
        w.append(rm.tensor([0.5], dtype="float16"), 4)  # float16 kept (tag 1); a Python int is int64
    with RecordDataset(path) as ds:
        assert [ds.layout(i).input.dtype_name for i in range(3)] == ["float32", "float32", "float16"]
        assert [ds.layout(i).target.dtype_name for i in range(3)] == ["int64", "bool", "int64"]
        assert ds[0][1].dtype == rm.int64 and ds[0][1].tolist() == [3, -7]
        assert ds[1][1].dtype == rm.bool and ds[1][1].tolist() == [True, False]
        assert ds[2][1].item() == 4 and ds[1][0].tolist() == [1.0, 2.0]
    with RecordWriter(path, float16=True) as w:  # float16=True narrows floating data only
        w.append(np.array([1.0, 1e-3], np.float32), np.array([2**40 + 1]))
    with RecordDataset(path) as ds:
        rec = ds.layout(0)
        assert rec.input.dtype_name == "float16" and rec.target.dtype_name == "int64"
        assert ds[0][0].tolist() == [1.0, float(np.float16(1e-3))] and ds[0][1].tolist() == [2**40 + 1]


@pytest.mark.parametrize("dtype, tag_name", [
    ("int8", "int8"), ("uint8", "uint8"), ("int16", "int16"), ("int32", "int32"), ("int64", "int64"),
    ("uint16", "int32"), ("uint32", "int64"), ("uint64", "int64"), ("bool", "bool"),
])
def test_integer_and_bool_data_keep_their_values_and_a_type(tmp_path, dtype, tag_name):
    info = np.iinfo(dtype) if dtype != "bool" else None
    values = np.array([0, 1], dtype) if info is None else \
        np.array([max(info.min, -(2**62)), -1 if info.min < 0 else 0, 1, min(info.max, 2**62)], dtype)
    path = tmp_path / "ints.rrec"
    with RecordWriter(path) as w:
        w.append(values, values[:1])
    with RecordDataset(path) as ds:
        assert ds.layout(0).input.dtype_name == tag_name
        x, y = ds.get_numpy(0)
        assert x.dtype == np.dtype(tag_name) and x.tolist() == values.tolist() and y.tolist() == values[:1].tolist()
        assert ds[0][0].tolist() == values.tolist()
    (got,) = decode_file(path.read_bytes())  # the independent struct decoder reads the same
    assert got[0].tolist() == values.tolist()


@pytest.mark.parametrize("value, match", [
    (np.array([2**63], np.uint64), "beyond int64"), (np.array(["a"]), "dtype"), (np.zeros((1,) * 33), "at most 32"),
    (np.array([1 + 2j]), "complex128"),
])
def test_unstorable_values_are_refused(tmp_path, value, match):
    with pytest.raises(RumusError, match=match):
        with RecordWriter(tmp_path / "x.rrec") as w:
            w.append(value, np.ones(1))
    assert _leftovers(tmp_path) == []


def test_packed_and_fixed_point_tensors_are_refused(tmp_path):
    from rumus._creation import from_storage
    fixed = from_storage(np.zeros(4, np.int16), fixed_i16(8))
    with pytest.raises(DTypeError, match="fixed-point"):
        RecordWriter(tmp_path / "f.rrec").append(fixed, np.ones(1))
    for dt in (q8(32), int4(8)):
        packed = from_storage(np.zeros(4, np.uint32), dt)
        with pytest.raises(DTypeError, match="quantized"):
            RecordWriter(tmp_path / "q.rrec").append(np.ones(1), packed)

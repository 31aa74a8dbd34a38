"""TensorDataset, Subset, ConcatDataset, random_split and RecordDataset as a dataset."""

import pickle

import numpy as np
import pytest

import rumus as rm
from rumus.data import ConcatDataset, Dataset, RecordDataset, RecordWriter, Subset, TensorDataset, random_split


def _ds(n=10):
    return TensorDataset(rm.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3)), rm.tensor(np.arange(n)))


def test_tensor_dataset():
    ds = _ds()
    assert len(ds) == 10
    x, y = ds[2]
    assert x.tolist() == [6.0, 7.0, 8.0] and y.item() == 2
    nx, ny = ds.get_numpy(-1)
    assert nx.tolist() == [27.0, 28.0, 29.0] and ny == 9
    ds.tensors[1][0] = 100  # an in-place write bumps the storage version: the host snapshot refreshes
    assert ds.get_numpy(0)[1] == 100 and ds[0][1].item() == 100
    with pytest.raises(rm.RumusError, match="first dimension"):
        TensorDataset(rm.zeros(3, 2), rm.zeros(4))
    with pytest.raises(rm.RumusError, match="not a rumus Tensor"):
        TensorDataset(np.zeros(3))


def test_subset_and_concat():
    ds = _ds()
    sub = Subset(ds, [7, 2, 5])
    assert len(sub) == 3 and sub[0][1].item() == 7 and sub.get_numpy(2)[1] == 5
    with pytest.raises(IndexError):
        sub[3]
    both = ds + _ds(4)
    assert isinstance(both, ConcatDataset) and len(both) == 14
    assert both[10][1].item() == 0 and both[-1][1].item() == 3 and both.get_numpy(9)[1] == 9
    with pytest.raises(IndexError):
        both[14]


def test_random_split():
    ds = _ds(10)
    a, b = random_split(ds, [7, 3], generator=rm.Generator(0))
    assert (len(a), len(b)) == (7, 3)
    assert sorted(a.indices + b.indices) == list(range(10))
    again = random_split(ds, [7, 3], generator=rm.Generator(0))
    assert again[0].indices == a.indices
    assert random_split(ds, [7, 3], generator=rm.Generator(1))[0].indices != a.indices
    parts = random_split(ds, [0.5, 0.3, 0.2], generator=rm.Generator(0))
    assert [len(p) for p in parts] == [5, 3, 2]
    assert [len(p) for p in random_split(_ds(11), [0.5, 0.5])] == [6, 5]  # remainder round-robin
    with pytest.raises(rm.RumusError, match="sum"):
        random_split(ds, [5, 4])


def test_base_dataset_contract():
    class Squares(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i >= 3:
                raise IndexError(i)
            return rm.tensor([float(i * i)])

    assert [t.item() for t in Squares()] == [0.0, 1.0, 4.0]
    assert Squares().get_numpy(2).tolist() == [4.0]
    with pytest.raises(NotImplementedError):
        Dataset()[0]


def test_record_dataset_gives_cpu_float32_tensors_and_pickles_by_path(tmp_path):
    path = tmp_path / "r.rrec"
    with RecordWriter(path) as w:
        w.append(np.arange(6, dtype=np.float16).reshape(2, 3), np.array(1.0, np.float32))
    ds = RecordDataset(path)
    x, y = ds[0]
    assert x.shape == (2, 3) and x.dtype == rm.float32 and str(x.device) == "cpu" and y.shape == ()
    assert ds.layout(0).input.shape == (2, 3) and ds.verify() == 1
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[0][0].tolist() == x.tolist() and "1 records" in repr(clone)
    ds.close()
    clone.close()
    assert "closed" in repr(ds)


def test_batched_host_path_equals_sample_by_sample(tmp_path):
    from rumus.data import numpy_collate
    path = tmp_path / "r.rrec"
    with RecordWriter(path) as w:
        for i in range(10):
            w.append(np.full((2, 2), i, np.float16), np.array([i], np.float32))
    with RecordDataset(path) as rds:
        tds = _ds(10)
        for ds in (rds, tds, Subset(rds, [3, 1, 4, 1, 5]), random_split(tds, [6, 4], generator=rm.Generator(2))[1]):
            idx = [3, 0, 2]
            whole = ds.get_numpy_batch(idx)
            one_by_one = numpy_collate([ds.get_numpy(i) for i in idx])
            assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(whole, one_by_one))

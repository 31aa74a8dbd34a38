"""DataLoader: order, shuffling, drop_last, workers (threads and processes), errors and shutdown."""

import os
import threading
import time
import traceback
from collections import namedtuple

import numpy as np
import pytest
from rrec_reference import time_limit

import rumus as rm
from rumus.data import DataLoader, Dataset, RecordDataset, RecordWriter, TensorDataset, default_collate
from rumus.data import get_worker_info

MODES = [(0, "thread"), (2, "thread"), (2, "process")]


def _ids(n: int = 23) -> TensorDataset:
    return TensorDataset(rm.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2)), rm.tensor(np.arange(n)))


def _order(loader) -> list[list[int]]:
    return [b[1].tolist() for b in loader]


def test_sequential_batches_and_drop_last():
    loader = DataLoader(_ids(), batch_size=5)
    assert len(loader) == 5
    batches = list(loader)
    assert [b[1].tolist() for b in batches][-1] == [20, 21, 22]
    x, y = batches[0]
    assert x.shape == (5, 2) and x.dtype == rm.float32 and y.dtype == rm.int64
    assert x.tolist()[1] == [2.0, 3.0]
    dropped = DataLoader(_ids(), batch_size=5, drop_last=True)
    assert len(dropped) == 4 and _order(dropped)[-1] == [15, 16, 17, 18, 19]
    assert len(DataLoader(_ids(20), batch_size=5, drop_last=True)) == 4


@pytest.mark.parametrize("workers, mode", MODES)
def test_same_batch_order_for_a_seed_with_any_number_of_workers(workers, mode):
    reference = DataLoader(_ids(), batch_size=4, shuffle=True, seed=7)
    epochs = [_order(reference), _order(reference)]
    assert epochs[0] != epochs[1]  # a new permutation every epoch
    assert sorted(sum(epochs[0], [])) == list(range(23))
    loader = DataLoader(_ids(), batch_size=4, shuffle=True, seed=7, num_workers=workers, worker_mode=mode)
    with time_limit(20):
        assert [_order(loader), _order(loader)] == epochs


def test_shuffle_with_generator():
    a = _order(DataLoader(_ids(), batch_size=4, shuffle=True, generator=rm.Generator(3)))
    b = _order(DataLoader(_ids(), batch_size=4, shuffle=True, generator=rm.Generator(3), num_workers=2))
    c = _order(DataLoader(_ids(), batch_size=4, shuffle=True, generator=rm.Generator(4)))
    assert a == b and a != c and sorted(sum(a, [])) == list(range(23))
    rm.manual_seed(11)
    d = _order(DataLoader(_ids(), batch_size=4, shuffle=True))  # rumus's default generator
    rm.manual_seed(11)
    assert _order(DataLoader(_ids(), batch_size=4, shuffle=True)) == d
    with pytest.raises(rm.RumusError, match="either"):
        DataLoader(_ids(), generator=rm.Generator(1), seed=1)


class _Slow(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        time.sleep(0.002)
        return np.full(3, i, np.float32)


@pytest.mark.timing
@pytest.mark.parametrize("workers, mode", MODES[1:])
def test_early_break_stops_the_workers(workers, mode):
    before = set(threading.enumerate())
    start = time.monotonic()
    with time_limit(10):
        for k, batch in enumerate(DataLoader(_Slow(), batch_size=4, num_workers=workers, worker_mode=mode)):
            assert batch.tolist()[0] == [4 * k] * 3
            if k == 2:
                break
    assert time.monotonic() - start < 5
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name.startswith("rumus-dataloader") and t not in before]
    import multiprocessing
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("rumus-dataloader")]


class _Failing(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        if i == 13:
            raise KeyError(f"sample {i} is broken")
        return float(i)


@pytest.mark.timing
@pytest.mark.parametrize("workers, mode", MODES)
def test_worker_exception_reaches_the_caller_with_its_traceback(workers, mode):
    loader = DataLoader(_Failing(), batch_size=4, num_workers=workers, worker_mode=mode)
    seen = []
    start = time.monotonic()
    with time_limit(10), pytest.raises(KeyError, match="sample 13 is broken") as info:
        for batch in loader:
            seen.append(batch.tolist())
    assert time.monotonic() - start < 5
    assert len(seen) == 3  # batches before the failing one arrive, in order
    text = "".join(traceback.format_exception(info.value))
    assert "__getitem__" in text and "raise KeyError" in text
    if workers:
        assert "DataLoader worker" in text


def test_worker_process_that_dies_is_reported_not_waited_for():
    class Dies(_Slow):
        def __getitem__(self, i):
            if i == 9:
                os._exit(3)
            return super().__getitem__(i)

    with time_limit(10), pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(DataLoader(Dies(), batch_size=4, num_workers=2, worker_mode="process"))


@pytest.mark.parametrize("workers, mode", MODES)
def test_worker_info_and_init_fn(workers, mode):
    class Info(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            info = get_worker_info()
            return -1 if info is None else info.id

    ids = sum((b.tolist() for b in DataLoader(Info(), batch_size=2, num_workers=workers, worker_mode=mode)), [])
    assert ids == ([-1] * 8 if workers == 0 else [0, 0, 1, 1, 0, 0, 1, 1])  # batch b goes to worker b % n

    def bad_init(worker_id):
        raise ValueError(f"init failed in {worker_id}")

    if workers:
        with time_limit(10), pytest.raises(ValueError, match="init failed"):
            list(DataLoader(Info(), num_workers=workers, worker_mode=mode, worker_init_fn=bad_init))


Pair = namedtuple("Pair", "a b")


class _Nested(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": rm.tensor([i, i + 0.5]), "n": i, "f": i / 2, "ok": i % 2 == 0, "name": f"s{i}",
                "pair": Pair(np.float16(i), [np.arange(2) + i])}


@pytest.mark.parametrize("workers, mode", MODES)
def test_default_collate_recurses_into_structures(workers, mode):
    batch = next(iter(DataLoader(_Nested(), batch_size=3, num_workers=workers, worker_mode=mode)))
    assert batch["x"].shape == (3, 2) and batch["x"].dtype == rm.float32
    assert batch["n"].dtype == rm.int64 and batch["n"].tolist() == [0, 1, 2]
    assert batch["f"].dtype == rm.float32 and batch["ok"].dtype == rm.bool and batch["ok"].tolist() == [1, 0, 1]
    assert batch["name"] == ["s0", "s1", "s2"]
    assert isinstance(batch["pair"], Pair) and batch["pair"].a.dtype == rm.float16
    assert batch["pair"].b[0].tolist() == [[0, 1], [1, 2], [2, 3]]
    direct = default_collate([_Nested()[i] for i in range(3)])
    assert direct["x"].tolist() == batch["x"].tolist() and direct["pair"].b[0].dtype == rm.int64


@pytest.mark.parametrize("workers, mode", MODES)
def test_custom_collate_fn(workers, mode):
    loader = DataLoader(_ids(10), batch_size=4, num_workers=workers, worker_mode=mode,
                        collate_fn=lambda samples: [int(y.item()) for _, y in samples])
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


@pytest.mark.parametrize("workers, mode", MODES)
def test_record_dataset_through_the_loader(tmp_path, workers, mode):
    path = tmp_path / "d.rrec"
    with RecordWriter(path) as w:
        for i in range(17):
            w.append(np.full((2, 2), i, np.float32), np.array([i % 3], np.float16))
    with RecordDataset(path) as ds:
        loader = DataLoader(ds, batch_size=5, shuffle=True, seed=2, num_workers=workers, worker_mode=mode)
        batches = list(loader)
        assert [b[0].shape for b in batches] == [(5, 2, 2)] * 3 + [(2, 2, 2)]
        seen = sum((b[0].numpy()[:, 0, 0].tolist() for b in batches), [])
        assert sorted(seen) == list(range(17))
        assert all(b[1].dtype == rm.float32 for b in batches)
        assert seen == sum((b[0].numpy()[:, 0, 0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True,
                                                                              seed=2)), [])


def test_bad_arguments():
    for kwargs in ({"batch_size": 0}, {"num_workers": -1}, {"prefetch_factor": 0, "num_workers": 1},
                   {"worker_mode": "fiber"}):
        with pytest.raises(rm.RumusError):
            DataLoader(_ids(), **kwargs)


def test_timeout_and_empty_dataset():
    with time_limit(10), pytest.raises(TimeoutError, match="timed out"):
        next(iter(DataLoader(_Slow(), batch_size=100, num_workers=1, timeout=0.05)))
    empty = TensorDataset(rm.zeros(0, 3))
    for workers in (0, 2):
        assert list(DataLoader(empty, batch_size=4, num_workers=workers)) == []


def test_spawned_worker_processes_reopen_the_record_file_by_path(tmp_path):
    path = tmp_path / "s.rrec"
    with RecordWriter(path) as w:
        for i in range(6):
            w.append(np.full(2, i, np.float32), np.array(i, np.float32))
    with RecordDataset(path) as ds, time_limit(60):
        loader = DataLoader(ds, batch_size=4, num_workers=1, worker_mode="process", multiprocessing_context="spawn")
        assert [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5]]


def test_unpicklable_dataset_with_spawn_fails_cleanly():
    class Local(Dataset):  # a local class cannot be pickled for a spawned process
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return float(i)

    import multiprocessing
    with time_limit(30), pytest.raises(Exception, match="pickle|Can't get local"):
        list(DataLoader(Local(), num_workers=2, worker_mode="process", multiprocessing_context="spawn"))
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("rumus-dataloader")]

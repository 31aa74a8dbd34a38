"""DDP and the collectives through the in-process adapter (two CPU ranks as threads)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from ddp_case import train_ddp, train_single

import rumus as rm
import rumus.distributed as dist
from rumus.distributed import CommunicatorError, ReduceOp


def _assert_matches_single(results: list[list[np.ndarray]]) -> None:
    expected = train_single()
    for r, got in enumerate(results):
        for a, e in zip(got, expected):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
    for a, b in zip(results[0], results[1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bucket_cap_mb", [25.0, 0.0005])
def test_ddp_in_process_matches_single_process(bucket_cap_mb: float) -> None:
    _assert_matches_single(dist.spawn(lambda c: train_ddp(c, bucket_cap_mb), 2))


def test_ddp_no_sync_accumulation_matches_single_process() -> None:
    _assert_matches_single(dist.spawn(lambda c: train_ddp(c, accumulate=True), 2))


def test_ddp_buckets_follow_the_cap() -> None:
    from ddp_case import make_model

    def run(c: dist.InProcessCommunicator) -> list[int]:
        return dist.DistributedDataParallel(make_model(0), c, bucket_cap_mb=0.0005).bucket_sizes
    sizes = dist.spawn(run, 2)[0]
    assert len(sizes) > 1 and sum(sizes) == 6


def test_ddp_refuses_a_backward_that_left_gradients_unreduced() -> None:
    from ddp_case import make_model

    def run(c: dist.InProcessCommunicator) -> None:
        model = dist.DistributedDataParallel(make_model(0), c)
        x = rm.ones(2, 5)
        out = model(x)
        (model.module.fc3.weight.sum() * 0 + out[:, 0].sum()).backward()  # reaches all params...
        out = model(x)
        out2 = model.module.fc1(x)  # ...but here fc1 gets a gradient from outside the DDP graph only
        (out2.sum()).backward()
        model(x)
    with pytest.raises(CommunicatorError, match="did not produce every expected gradient"):
        dist.spawn(run, 2, timeout_s=20)


def _collectives(c: dist.InProcessCommunicator) -> dict[str, np.ndarray]:
    r, n = c.rank, c.world_size
    out: dict[str, np.ndarray] = {}
    for op in ReduceOp:
        t = rm.tensor([1.0 + r, -2.0 * r, 5.0])
        dist.all_reduce(t, op)
        out[op.value] = t.numpy()
    t = rm.tensor([float(r)] * 3)
    dist.broadcast(t, src=1)
    out["broadcast"] = t.numpy()
    out["all_gather"] = dist.all_gather(rm.tensor([r, 10 * r], dtype=rm.int32)).numpy()
    out["reduce_scatter"] = dist.reduce_scatter(rm.arange(4 * n, dtype=rm.float32).reshape(2 * n, 2) * (r + 1)).numpy()
    if r == 0:
        dist.send(rm.tensor([7.0, 8.0]), dst=1, tag=3)
    else:
        out["recv"] = dist.recv(rm.zeros(2), src=0, tag=3).numpy()
    h = rm.tensor([1.0 + r] * 5, dtype=rm.float64)
    work = dist.all_reduce(h, ReduceOp.SUM, async_op=True)
    work.wait()
    out["f64"] = h.numpy()
    dist.barrier()
    return out


def test_tensor_collectives_in_process() -> None:
    res = dist.spawn(_collectives, 2)
    for r in range(2):
        got = res[r]
        np.testing.assert_array_equal(got["sum"], [3.0, -2.0, 10.0])
        np.testing.assert_array_equal(got["avg"], [1.5, -1.0, 5.0])
        np.testing.assert_array_equal(got["max"], [2.0, 0.0, 5.0])
        np.testing.assert_array_equal(got["min"], [1.0, -2.0, 5.0])
        np.testing.assert_array_equal(got["broadcast"], [1.0, 1.0, 1.0])
        np.testing.assert_array_equal(got["all_gather"], [[0, 0], [1, 10]])
        full = np.arange(8, dtype=np.float32).reshape(4, 2) * 3  # rank0 x1 + rank1 x2
        np.testing.assert_array_equal(got["reduce_scatter"], full[2 * r:2 * r + 2])
        np.testing.assert_array_equal(got["f64"], [3.0] * 5)
        assert got["f64"].dtype == np.float64
    np.testing.assert_array_equal(res[1]["recv"], [7.0, 8.0])


def test_chunked_staging_reduces_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    from rumus.distributed import collectives
    monkeypatch.setattr(collectives, "CHUNK_BYTES", 12)  # 3 float32 per chunk: 4 chunks for 10 values

    def run(c: dist.InProcessCommunicator) -> np.ndarray:
        t = rm.arange(10, dtype=rm.float32) * (c.rank + 1)
        dist.all_reduce(t)
        return t.numpy()
    for got in dist.spawn(run, 2):
        np.testing.assert_array_equal(got, np.arange(10) * 3.0)


def test_integer_average_is_refused() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        dist.all_reduce(rm.tensor([1, 2], dtype=rm.int32), ReduceOp.AVG)
    with pytest.raises(CommunicatorError, match="truncate"):
        dist.spawn(run, 2)


@pytest.mark.timing
def test_a_rank_that_raises_stops_every_rank_in_process() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        if c.rank == 1:
            raise ValueError("boom from rank 1")
        dist.all_reduce(rm.ones(3))
    start = time.monotonic()
    with pytest.raises(ValueError, match="boom from rank 1"):
        dist.spawn(run, 2, timeout_s=30)
    assert time.monotonic() - start < 10


def test_a_rank_that_never_arrives_times_out() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        if c.rank == 0:
            dist.all_reduce(rm.ones(3))
    with pytest.raises(CommunicatorError, match="did not reach a collective within 1 s"):
        dist.spawn(run, 2, timeout_s=1)


def test_no_communicator_is_a_clear_error() -> None:
    with pytest.raises(CommunicatorError, match="no communicator"):
        dist.all_reduce(rm.ones(2))


def test_ddp_starts_reducing_buckets_while_backward_still_runs() -> None:
    from ddp_case import make_model

    def run(c: dist.InProcessCommunicator) -> list[int]:
        model = make_model(0)
        pending: list[int] = []  # at each bucket's all-reduce: parameters still without a gradient
        real = c.all_reduce

        def spy(buf: np.ndarray, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> dist.Work:
            pending.append(sum(p.grad is None for p in model.parameters()))
            return real(buf, op, async_op)
        ddp = dist.DistributedDataParallel(model, c, bucket_cap_mb=0.0005)
        c.all_reduce = spy  # type: ignore[method-assign]
        ddp(rm.ones(2, 5)).sum().backward()
        assert all(p.grad is not None for p in model.parameters())
        return pending
    pending = dist.spawn(run, 2)[0]
    assert len(pending) > 1 and pending[0] > 0 and pending == sorted(pending, reverse=True)


def test_in_process_communicator_satisfies_the_port() -> None:
    def run(c: dist.InProcessCommunicator) -> bool:
        return isinstance(c, dist.Communicator) and (c.rank, c.world_size) == (c.rank, 3)
    assert dist.spawn(run, 3) == [True, True, True]


def test_send_recv_shape_mismatch_is_refused() -> None:
    def run(c: dist.InProcessCommunicator) -> None:
        if c.rank == 0:
            c.send(np.zeros(3, np.float32), 1)
        else:
            c.recv(np.zeros(4, np.float32), 0)
    with pytest.raises(CommunicatorError, match="rank 0 sent"):
        dist.spawn(run, 2, timeout_s=10)

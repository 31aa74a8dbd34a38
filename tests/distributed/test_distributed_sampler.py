"""DistributedSampler: disjoint, equal shares covering the dataset; same shuffle on every rank."""

from __future__ import annotations

import pytest

from rumus.distributed import CommunicatorError, DistributedSampler


@pytest.mark.parametrize("n,world", [(10, 3), (9, 3), (2, 4)])
def test_shares_are_equal_and_cover_the_dataset(n: int, world: int) -> None:
    data = list(range(n))
    shares = [DistributedSampler(data, world, r, seed=5).indices() for r in range(world)]
    assert len({len(s) for s in shares}) == 1
    flat = [i for s in shares for i in s]
    assert set(flat) == set(range(n))
    assert len(flat) == -(-n // world) * world  # padded by repeating the start


def test_drop_last_gives_disjoint_shares() -> None:
    shares = [DistributedSampler(list(range(10)), 3, r, drop_last=True).indices() for r in range(3)]
    flat = [i for s in shares for i in s]
    assert len(flat) == 9 and len(set(flat)) == 9


def test_epochs_reshuffle_identically_on_every_rank() -> None:
    a, b = DistributedSampler(list(range(20)), 2, 0), DistributedSampler(list(range(20)), 2, 1)
    e0 = a.indices() + b.indices()
    a.set_epoch(1)
    b.set_epoch(1)
    e1 = a.indices() + b.indices()
    assert sorted(e0) == sorted(e1) == list(range(20)) and e0 != e1


def test_shard_is_this_ranks_dataset() -> None:
    s = DistributedSampler(["a", "b", "c", "d"], 2, 1, shuffle=False)
    assert [s.shard()[i] for i in range(len(s))] == ["b", "d"]


def test_bad_rank_is_refused() -> None:
    with pytest.raises(CommunicatorError, match="rank 2"):
        DistributedSampler([1, 2], 2, 2)

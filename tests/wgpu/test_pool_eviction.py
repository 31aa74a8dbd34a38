"""The wgpu buffer pool past its cache cap: the buffers released longest ago are destroyed first, of any
size, so a loop's working set displaces what an earlier phase left instead of being re-created every step.
A fake driver device counts creations and destructions (the pool only calls create_buffer and destroy)."""

from __future__ import annotations

from typing import Any

import pytest

from rumus_wgpu.pool import BufferPool, bucket_size

MB = 1 << 20


class FakeBuffer:
    def __init__(self, size: int, log: list[str]) -> None:
        self.size, self.log = size, log

    def destroy(self) -> None:
        self.log.append(f"destroy {self.size}")


class FakeDevice:
    def __init__(self) -> None:
        self.log: list[str] = []

    def create_buffer(self, size: int, usage: int) -> Any:
        self.log.append(f"create {size}")
        return FakeBuffer(size, self.log)


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> tuple[BufferPool, FakeDevice]:
    monkeypatch.setenv("RUMUS_WGPU_POOL_CACHE_MB", "10")
    dev = FakeDevice()
    return BufferPool(dev, max_binding=1 << 40, max_buffer=1 << 40), dev


def test_old_sizes_make_room_for_the_working_set(pool: tuple[BufferPool, FakeDevice]) -> None:
    p, dev = pool
    junk = [p.acquire(2 * MB) for _ in range(4)] + [p.acquire(1 * MB)]  # an earlier phase: 9 MiB
    for buf, size in junk:
        p.release(buf, size)
    assert p.stats()["cached_bytes"] == 9 * MB
    work = [p.acquire(3 * MB) for _ in range(3)]  # the loop's working set: 9 MiB, all new
    for buf, size in work:
        p.release(buf, size)
    assert p.stats()["cached_bytes"] <= 10 * MB
    assert dev.log.count(f"destroy {2 * MB}") == 4 and dev.log.count(f"destroy {3 * MB}") == 0
    created = len([e for e in dev.log if e.startswith("create")])
    for _ in range(5):  # later steps: every buffer reused, nothing created or destroyed
        again = [p.acquire(3 * MB) for _ in range(3)]
        for buf, size in again:
            p.release(buf, size)
    assert len([e for e in dev.log if e.startswith("create")]) == created
    assert p.stats()["cached_buffers"] == 4  # three working-set buffers and the 1 MiB one released last of the junk


def test_eviction_is_oldest_first_across_sizes(pool: tuple[BufferPool, FakeDevice]) -> None:
    p, dev = pool
    a, b, c = p.acquire(4 * MB), p.acquire(2 * MB), p.acquire(4 * MB)
    for buf, size in (a, b, c):  # released in this order: a (4), b (2), c (4) = 10 MiB
        p.release(buf, size)
    d = p.acquire(3 * MB)
    p.release(*d)  # needs 3 MiB: a (oldest) goes, b and c stay
    assert dev.log[-1] == f"destroy {4 * MB}"
    assert p.acquire(4 * MB)[0] is c[0] and p.acquire(2 * MB)[0] is b[0]


def test_a_buffer_beyond_the_cap_is_not_cached(pool: tuple[BufferPool, FakeDevice]) -> None:
    p, dev = pool
    small = p.acquire(MB)
    p.release(*small)
    big = p.acquire(16 * MB)
    p.release(*big)
    assert dev.log[-1] == f"destroy {bucket_size(16 * MB)}"
    assert p.stats()["cached_bytes"] == MB  # the small one was not evicted for a buffer that can't stay


def test_empty_forgets_everything(pool: tuple[BufferPool, FakeDevice]) -> None:
    p, _ = pool
    for _ in range(3):
        p.release(*p.acquire(2 * MB))
    p.empty()
    assert p.stats()["cached_bytes"] == 0 and p.stats()["cached_buffers"] == 0
    p.release(*p.acquire(2 * MB))  # the age table was cleared with the buckets: no stale entries
    assert p.stats()["cached_buffers"] == 1

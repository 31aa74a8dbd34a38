"""benchmarks/_launch_batch.py: GPU time per launch from R launches between two syncs. On a fake clock
(each launch costs 0.1 ms of device time, each sync 0.3 ms, recording 0.01 ms) the per-launch figure is the
launch's own 0.1 ms, not 0.1 + 0.3: the sync is paid once per batch and taken off; R fills the target."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import _launch_batch  # noqa: E402


class FakeDevice:
    def __init__(self) -> None:
        self.now = 0.0
        self.queued = 0.0
        self.dispatches = 0

    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += 1e-5  # recording on the host
        self.queued += 1e-4
        self.dispatches += 2

    def sync(self) -> None:
        self.now += max(self.queued - 0.0, 0.0) + 3e-4
        self.queued = 0.0


def test_sync_cost_is_paid_once_per_batch(monkeypatch):
    dev = FakeDevice()
    monkeypatch.setattr(_launch_batch.time, "perf_counter", dev.clock)
    batches = _launch_batch.LaunchBatches(dev.sync, lambda: (dev.dispatches, 0), target_s=2e-3, reps=3)
    assert batches.idle == pytest.approx(3e-4)
    t = batches.time(dev.step)
    assert t.launches == 19  # 2 ms of 0.11 ms launches (the fake device does not overlap recording)
    assert t.seconds == pytest.approx(1e-4 + 1e-5, rel=1e-6)  # the launch (and its recording), no sync
    assert t.host_seconds == pytest.approx(1e-5)
    assert t.kernels == 2 and t.new_buffers == 0


def test_batch_size_bounds(monkeypatch):
    dev = FakeDevice()
    monkeypatch.setattr(_launch_batch.time, "perf_counter", dev.clock)
    batches = _launch_batch.LaunchBatches(dev.sync, target_s=1.0, max_launches=50, reps=1)
    assert batches.time(dev.step).launches == 50
    assert batches.time(dev.step, bytes_per_launch=batches.max_batch_bytes // 12).launches == 12
    assert _launch_batch.LaunchBatches(dev.sync, target_s=1e-9, reps=1).time(dev.step).launches == 10


def test_record_first_keeps_recording_off_the_clock(monkeypatch):
    # a device that runs its queue only at the sync (rumus's recorder before its first batch bound): the batch
    # figure is recording + GPU in series (0.11 ms), the record-first figure the GPU alone (0.1 ms), in chunks
    # of first_batch // kernels launches (64 // 2 = 32)
    dev = FakeDevice()
    monkeypatch.setattr(_launch_batch.time, "perf_counter", dev.clock)
    syncs = []
    batches = _launch_batch.LaunchBatches(lambda: (syncs.append(dev.queued), dev.sync()), lambda: (dev.dispatches, 0),
                                          target_s=5e-3, reps=3, first_batch=64)
    t = batches.time(dev.step)
    assert t.seconds == pytest.approx(1.1e-4, rel=1e-6)
    assert t.gpu_seconds == pytest.approx(1e-4, rel=1e-6)
    assert syncs[-1] == pytest.approx(32 * 1e-4)  # a chunk holds the first batch's 64 dispatches, no more

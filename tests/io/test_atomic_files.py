"""Atomic saves: temps named after the target, removed on any exception, swept after a kill."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rumus as rm
from rumus.data.rrec_writer import RecordWriter
from rumus.io.files import AtomicFile, atomic_write, sweep_stale_temps, temp_prefix
from rumus_contracts import FileError, MissingFile


def _entries(d) -> list[str]:
    return sorted(os.listdir(d))


def test_temp_is_named_after_its_target_and_replaced_atomically(tmp_path) -> None:
    target = tmp_path / "data.rrec"
    target.write_bytes(b"old")
    af = AtomicFile(target)
    name = os.path.basename(af.tmp)
    assert name.startswith(".data.rrec.tmp-") and name.startswith(temp_prefix(str(target)))
    af.file.write(b"new")
    assert target.read_bytes() == b"old"  # nothing visible before the commit
    af.commit()
    assert target.read_bytes() == b"new" and _entries(tmp_path) == ["data.rrec"]


@pytest.mark.parametrize("exc", [ValueError("boom"), KeyboardInterrupt(), SystemExit(3)])
def test_any_exception_removes_the_temp_and_keeps_the_target(tmp_path, exc: BaseException) -> None:
    target = tmp_path / "m.safetensors"
    target.write_bytes(b"old")
    with pytest.raises(type(exc)):
        with AtomicFile(target) as f:
            f.write(b"half")
            raise exc
    assert target.read_bytes() == b"old" and _entries(tmp_path) == ["m.safetensors"]


def test_rrec_writer_interrupted_leaves_nothing(tmp_path) -> None:
    path = tmp_path / "d.rrec"
    with pytest.raises(KeyboardInterrupt):
        with RecordWriter(path) as w:
            w.append(np.zeros(3, np.float32), np.float32(1))
            raise KeyboardInterrupt
    assert _entries(tmp_path) == []


def test_permissions_of_an_existing_target_are_kept(tmp_path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"{}")
    os.chmod(target, 0o640)
    atomic_write(target, b"[]")
    assert (os.stat(target).st_mode & 0o777) == 0o640


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_next_save_sweeps_temps_of_dead_writers_only(tmp_path) -> None:
    target = tmp_path / "w.safetensors"
    dead = tmp_path / f".w.safetensors.tmp-{_dead_pid()}-abc123"
    alive = tmp_path / f".w.safetensors.tmp-{os.getppid()}-def456"  # a live process: maybe saving right now
    other = tmp_path / f".v.safetensors.tmp-{_dead_pid()}-aaaaaa"  # another target's temp: not ours
    for p in (dead, alive, other):
        p.write_bytes(b"partial")
    rm.io.save_file({"x": rm.ones(3)}, target)
    assert _entries(tmp_path) == sorted([alive.name, other.name, "w.safetensors"])
    assert sweep_stale_temps(str(tmp_path / "v.safetensors")) == [str(other)]


@pytest.mark.parametrize("save", ["safetensors", "rrec", "fixture", "checkpoint"])
def test_every_writer_saves_through_the_same_rule(tmp_path, save: str) -> None:
    from rumus.fixed.fixture import load_fixture
    from rumus.train import checkpointing
    dead = _dead_pid()
    name = {"safetensors": "a.safetensors", "rrec": "a.rrec", "fixture": "a.json", "checkpoint": "trainer.json"}[save]
    stale = tmp_path / f".{name}.tmp-{dead}-0123ab"
    stale.write_bytes(b"junk")
    if save == "safetensors":
        rm.io.save_file({"x": rm.ones(2)}, tmp_path / name)
    elif save == "rrec":
        with RecordWriter(tmp_path / name) as w:
            w.append(np.ones(2, np.float32), np.float32(0))
    elif save == "fixture":
        from shared_fixture_path import CANONICAL
        load_fixture(CANONICAL).write(tmp_path / name)
    else:
        checkpointing.save(str(tmp_path), {"w": rm.ones(2)}, None, {}, step=1)
    assert not stale.exists()
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_unwritable_directory_is_a_file_error(tmp_path) -> None:
    with pytest.raises(MissingFile, match="no such file"):
        atomic_write(tmp_path / "no" / "dir" / "x.bin", b"1")
    with pytest.raises(FileError):
        atomic_write(tmp_path, b"1")  # the target is a directory

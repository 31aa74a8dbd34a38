"""The `.pt` loader's security rule, one test per finding it answers (the broad seeded classes are in
tests/adversarial/cases_loaders.py): BUILD on allowed globals, layouts past storage, shared-reference
DAGs, stride-0 expands, zip bombs, non-regular paths, disk full, ONNX external data crashes."""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import FileError, FormatError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "adversarial"))
import hostile_files as h  # noqa: E402

torch = pytest.importorskip("torch")
F32 = np.arange(4, dtype=np.float32).tobytes()


def _load(data: bytes) -> Any:
    return rm.load(io.BytesIO(data))


def test_build_on_a_dtype_is_refused_and_changes_nothing() -> None:
    pkl = h.pickle_of(h.glob("torch", "float32"), h.dict_of(_np=h.text("float16")), b"b")
    with pytest.raises(FormatError, match="BUILD"):
        _load(h.torch_zip(pkl))
    with pytest.raises(Exception, match="Weights only load failed"):  # torch refuses it too
        torch.load(io.BytesIO(h.torch_zip(pkl)), weights_only=True)
    assert rm.tensor([3.14159265]).tolist() == [float(np.float32(3.14159265))]


def test_build_of_a_shape_past_the_storage_is_refused() -> None:
    pkl = h.pickle_of(h.tensor(0, (4,), (1,)), h.dict_of(shape=h.tup(h.num(10**8))), b"b")
    with pytest.raises(FormatError):
        _load(h.torch_zip(pkl, {"0": F32}))
    with pytest.raises(FormatError, match="past the end of its 4-element storage"):
        _load(h.torch_zip(h.pickle_of(h.tensor(0, (10**8,), (1,))), {"0": F32}))


@pytest.mark.parametrize("offset,size,stride", [(-1, (1,), (1,)), (0, (2,), (-1,)), (0, (-3,), (1,)),
                                                (0, (2**62, 2**62), (0, 0)), (2**62, (1,), (1,))])
def test_negative_and_overflowing_layouts_are_format_errors(offset: int, size: tuple[int, ...],
                                                            stride: tuple[int, ...]) -> None:
    with pytest.raises(FormatError):
        _load(h.torch_zip(h.pickle_of(h.tensor(offset, size, stride)), {"0": F32}))


def test_a_legacy_dag_of_2_to_the_40_paths_loads_shared() -> None:
    ops = [b"]q\x00", h.tensor(0, (4,), (1,), legacy=True), b"a"]
    for i in range(1, 41):
        ops += [b"0](", b"h" + bytes([i - 1]), b"h" + bytes([i - 1]), b"e", b"q" + bytes([i])]
    node = _load(h.torch_legacy(h.pickle_of(*ops), [("0", 4, F32)]))
    for _ in range(40):
        assert node[0] is node[1]
        node = node[0]
    assert node[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_stride_0_tensor_of_2_to_the_27_elements_stays_a_view() -> None:
    data = h.torch_zip(h.pickle_of(h.tensor(0, (2**27,), (0,), numel=1)), {"0": np.float32([1.5]).tobytes()})
    t = _load(data)
    assert t.shape == (2**27,) and t._storage.numel == 1 and float(t[123_456_789]) == 1.5
    with pytest.raises(FormatError, match="MAX_VIEW_ELEMENTS"):
        _load(h.torch_zip(h.pickle_of(h.tensor(0, (2**40,), (0,), numel=1)), {"0": F32}))


def test_torch_views_keep_sharing_their_storage() -> None:
    x = torch.arange(6.0)
    buf = io.BytesIO()
    torch.save({"x": x, "tail": x[3:], "t": x.view(2, 3).t()}, buf)
    got = rm.load(io.BytesIO(buf.getvalue()))
    assert got["x"]._storage is got["tail"]._storage is got["t"]._storage
    np.testing.assert_array_equal(got["t"].numpy(), x.view(2, 3).t().numpy())


def test_a_zip_bomb_is_refused_before_inflating_naming_the_bound() -> None:
    import zlib
    stream = h.deflate_zeros(1 << 16)
    bomb = h.zip_with_raw_entry({"archive/data.pkl": h.pickle_of(h.tensor(0, (4,), (1,)))}, "archive/data/0",
                                stream, 1 << 16, zlib.crc32(bytes(1 << 16)), declared_size=512 << 20)
    assert len(bomb) < 4096
    with pytest.raises(FormatError, match="MAX_INFLATED_BYTES"):
        _load(bomb)


@pytest.mark.parametrize("count", range(100))
def test_mutated_rumus_checkpoints_load_right_or_raise_format_error(count: int) -> None:
    buf = io.BytesIO()
    original = {"w": rm.arange(6.0).reshape(2, 3), "n": 7, "s": [rm.tensor([True, False]), "x"]}
    rm.save(original, buf)
    data = bytearray(buf.getvalue())
    rng = np.random.default_rng(count)
    for p in rng.integers(0, len(data), 1 + count % 4):
        data[int(p)] ^= 1 << int(rng.integers(0, 8))
    cut = len(data) if count % 3 else int(rng.integers(0, len(data)))
    try:
        back = _load(bytes(data[:cut]))
    except FormatError:
        return
    assert back["n"] == 7 and back["s"][1] == "x"
    np.testing.assert_array_equal(back["w"].numpy(), original["w"].numpy())


def test_dev_zero_and_fifos_are_refused_without_reading(tmp_path: Path) -> None:
    (tmp_path / "zero.pt").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.pt")
    for path in (tmp_path / "zero.pt", tmp_path / "fifo.pt", tmp_path):
        with pytest.raises(FileError, match="not a regular file"):
            rm.load(path)
        with pytest.raises(FileError, match="not a regular file"):
            rm.io.load_file(path)


def test_disk_full_is_a_file_error_and_keeps_the_previous_file(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "c.pt"
    rm.save({"w": rm.ones(3)}, path)

    class FullDisk(io.FileIO):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(io, "FileIO", FullDisk)
    with pytest.raises(FileError, match="No space left"):
        rm.save({"w": rm.zeros(3)}, path)
    monkeypatch.undo()
    assert rm.load(path)["w"].tolist() == [1.0, 1.0, 1.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def _ort(path: Path) -> float:
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return float(sess.run(None, {"x": np.zeros((1, 3), np.float32)})[0][0, 0])


def _export(path: Path, bias: float) -> None:
    model = rm.nn.Linear(3, 2)
    with rm.no_grad():
        model.bias.fill_(bias)
    rm.onnx.export(model, (rm.randn(1, 3),), str(path), input_names=["x"], external_data=True)


@pytest.mark.parametrize("failing_call", [1, 2, 3])
def test_onnx_external_data_crash_between_renames_keeps_the_old_model(tmp_path: Path, monkeypatch: Any,
                                                                       failing_call: int) -> None:
    path = tmp_path / "m.onnx"
    _export(path, 1.0)  # a small model with external_data=True works
    assert _ort(path) == 1.0
    before = sorted(p.name for p in tmp_path.iterdir())
    real, calls = os.replace, [0]

    def crashing(src: Any, dst: Any) -> None:
        calls[0] += 1
        if calls[0] == failing_call:
            raise OSError(errno.EIO, "simulated crash")
        real(src, dst)
    monkeypatch.setattr(os, "replace", crashing)
    with pytest.raises(FileError):
        _export(path, 2.0)
    monkeypatch.undo()
    assert _ort(path) == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    _export(path, 2.0)
    assert _ort(path) == 2.0 and len(list(tmp_path.iterdir())) == 2  # the model and its one data file

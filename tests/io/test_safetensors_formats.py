"""safetensors as PyTorch writes it (BF16, F16, F8) and hostile headers naming the tensor and field."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import rumus as rm
from rumus_contracts import FormatError, MissingFile

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")


def test_bf16_and_f16_written_by_torch_load_bit_for_bit(tmp_path) -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 8, generator=g).to(torch.bfloat16)
    h = torch.randn(5, generator=g).half()
    st_torch.save_file({"w": w, "h": h}, str(tmp_path / "m.safetensors"))
    out = rm.io.load_file(tmp_path / "m.safetensors")
    assert out["w"].dtype == rm.bfloat16 and out["h"].dtype == rm.float16
    np.testing.assert_array_equal(out["w"].numpy(), w.float().numpy())
    np.testing.assert_array_equal(out["h"].numpy(), h.numpy())
    rm.io.save_file(out, tmp_path / "back.safetensors")  # and back: torch reads identical bits
    back = st_torch.load_file(str(tmp_path / "back.safetensors"))
    assert torch.equal(back["w"], w) and torch.equal(back["h"], h)


@pytest.mark.parametrize("dtype,tag", [("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")])
def test_float8_is_refused_naming_the_dtype(tmp_path, dtype: str, tag: str) -> None:
    st_torch.save_file({"q": torch.zeros(4, dtype=getattr(torch, dtype))}, str(tmp_path / "q.safetensors"))
    with pytest.raises(FormatError, match=f"'q' has dtype {tag} .* RUMUS does not support"):
        rm.io.load_file(tmp_path / "q.safetensors")


def _blob(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize("header,data,match", [
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4, "'w': shape \\[2\\] of F32 needs 8"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 400]}}, b"\0" * 4, "'w'.data_offsets"),
    ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "'w'.shape"),
    ({"w": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "'w'.dtype: unknown"),
    ({"w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "'w'.data_offsets: missing field"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8, "4 bytes after the last tensor"),
    ({"w": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\x07", "other than 0 and 1"),
])
def test_hostile_headers_name_the_tensor_and_field(tmp_path, header: dict, data: bytes, match: str) -> None:
    path = tmp_path / "h.safetensors"
    path.write_bytes(_blob(header, data))
    with pytest.raises(FormatError, match=match):
        rm.io.load_file(path)


def test_missing_file_is_file_not_found(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        rm.io.load_file(tmp_path / "absent.safetensors")
    with pytest.raises(MissingFile, match="absent.safetensors"):
        rm.io.load_file(tmp_path / "absent.safetensors")


def test_checkpoint_sidecar_cannot_point_outside_its_directory(tmp_path) -> None:
    from rumus.train import checkpointing
    checkpointing.save(str(tmp_path), {"w": rm.ones(2)}, None, {}, step=1)
    sidecar = json.loads((tmp_path / "trainer.json").read_text())
    sidecar["tensors_file"] = "../" + os.path.basename(str(tmp_path)) + "/state-1.safetensors"
    (tmp_path / "trainer.json").write_text(json.dumps(sidecar))
    with pytest.raises(FormatError, match="tensors_file must be a file name"):
        checkpointing.load(str(tmp_path))
    (tmp_path / "trainer.json").write_text("[" * 5000)
    with pytest.raises(FormatError, match="nested"):
        checkpointing.load(str(tmp_path))


def test_a_hostile_sidecar_can_neither_crash_a_save_nor_aim_its_cleanup_elsewhere(tmp_path) -> None:
    from rumus.train import checkpointing
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "trainer.json").write_text(json.dumps({"tensors_file": "../victim.txt"}))
    checkpointing.save(str(ckpt), {"w": rm.ones(2)}, None, {}, step=1)
    assert victim.read_text() == "keep me"
    (ckpt / "trainer.json").write_text("[" * 100000)
    checkpointing.save(str(ckpt), {"w": rm.ones(2)}, None, {}, step=2)
    model, _, sidecar = checkpointing.load(str(ckpt))
    assert sidecar["step"] == 2 and model["w"].numpy().tolist() == [1.0, 1.0]

"""safetensors files, read and written here (no pickle, no code): an 8-byte little-endian header length,
a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the tensor bytes.

Reading goes through the hardened JSON loader and checks every field against the file's real size
before any array is made, so a corrupt or hostile file is a FormatError naming the tensor and the
field. BF16 and F16 load as rumus bfloat16 / float16 bit for bit (PyTorch writes BF16 checkpoints
all the time). F8_E4M3 / F8_E5M2 are refused with a FormatError: RUMUS has no 8-bit float dtype, and
widening them silently would hand back a file that no longer round-trips. Writes are atomic (io.files).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from rumus_contracts import DType, DTypeError, FormatError, RumusError, parse_dtype

from ..tensor import Tensor
from . import json_safe
from .files import atomic_write, read_regular_file

MAX_HEADER_BYTES = 100 << 20  # the safetensors reference implementation's own limit
MAX_RANK = 64
HEADER_LIMITS = json_safe.JsonLimits(max_bytes=MAX_HEADER_BYTES, max_depth=4, max_int_digits=20)

# safetensors dtype tag -> (rumus dtype name, little-endian numpy storage dtype)
_READ: dict[str, tuple[str, str]] = {
    "F64": ("float64", "<f8"), "F32": ("float32", "<f4"), "F16": ("float16", "<f2"),
    "BF16": ("bfloat16", "<u2"), "I64": ("int64", "<i8"), "I32": ("int32", "<i4"), "I16": ("int16", "<i2"),
    "I8": ("int8", "i1"), "U8": ("uint8", "u1"), "BOOL": ("bool", "?"),
}
_WRITE = {rumus: tag for tag, (rumus, _) in _READ.items()}
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
             "U64": 8, "U32": 4, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
_UNSUPPORTED = {
    "F8_E4M3": "8-bit float (e4m3)", "F8_E5M2": "8-bit float (e5m2)",
    "U64": "uint64", "U32": "uint32", "U16": "uint16",
}


def _host_bits(t: Tensor) -> tuple[str, np.ndarray]:
    """(dtype tag, C-contiguous little-endian array holding the tensor's exact stored values)."""
    name = t.dtype.name
    if name == "bfloat16":
        from .._creation import _bfloat16_bits  # numpy() widened to float32 exactly; narrow back, exact
        return "BF16", _bfloat16_bits(t.numpy())
    return _WRITE[name], np.asarray(t.numpy(), dtype=np.dtype(_READ[_WRITE[name]][1]), order="C")


def serialize(tensors: Mapping[str, Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding `tensors` (sorted by name) and `metadata`."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if not isinstance(t, Tensor):
            raise RumusError(f"save_file: '{name}' is a {type(t).__name__}, not a Tensor")
        if name == "__metadata__":
            raise RumusError("save_file: '__metadata__' is reserved by the safetensors format; rename the tensor")
        if t.dtype.name not in _WRITE:
            raise DTypeError(f"save_file: '{name}' has dtype {t.dtype}, which safetensors cannot hold; convert it to "
                             f"float32 first")
        tag, host = _host_bits(t)
        data = host.tobytes()
        header[name] = {"dtype": tag, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as the reference writer does
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save_file(tensors: Mapping[str, Tensor], path: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None) -> None:
    atomic_write(path, serialize(tensors, metadata))


def _entry(name: str, info: Any, where: str, data_len: int) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(info, dict):
        raise FormatError(f"{where}: tensor '{name}': expected an object, got {type(info).__name__}")
    extra = set(info) - {"dtype", "shape", "data_offsets"}
    missing = {"dtype", "shape", "data_offsets"} - set(info)
    if missing or extra:
        field = sorted(missing or extra)[0]
        raise FormatError(f"{where}: tensor '{name}'.{field}: {'missing field' if missing else 'unknown field'}")
    tag = info["dtype"]
    if not isinstance(tag, str) or tag not in _ITEMSIZE:
        raise FormatError(f"{where}: tensor '{name}'.dtype: unknown safetensors dtype {str(tag)[:20]!r}")
    if tag in _UNSUPPORTED:
        raise FormatError(f"{where}: tensor '{name}' has dtype {tag} ({_UNSUPPORTED[tag]}), which RUMUS does not "
                          f"support; convert it to float16, bfloat16 or float32 before saving")
    shape = info["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63 for d in shape):
        raise FormatError(f"{where}: tensor '{name}'.shape: expected at most {MAX_RANK} non-negative integers, got "
                          f"{str(shape)[:60]}")
    offsets = info["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(
            isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise FormatError(f"{where}: tensor '{name}'.data_offsets: expected [begin, end], got {str(offsets)[:60]}")
    begin, end = offsets
    if not 0 <= begin <= end <= data_len:
        raise FormatError(f"{where}: tensor '{name}'.data_offsets {offsets} lie outside the {data_len} data bytes "
                          f"(a truncated or corrupt file)")
    nbytes = math.prod(shape) * _ITEMSIZE[tag]
    if end - begin != nbytes:
        raise FormatError(f"{where}: tensor '{name}': shape {shape} of {tag} needs {nbytes} bytes, data_offsets "
                          f"hold {end - begin}")
    return tag, tuple(shape), begin, end


def parse(data: bytes, where: str) -> tuple[dict[str, tuple[str, np.ndarray]], dict[str, str]]:
    """({name: (rumus dtype name, host array)}, metadata) of a safetensors file's bytes; FormatError if malformed."""
    if len(data) < 8:
        raise FormatError(f"{where}: not a safetensors file (only {len(data)} bytes; the header length alone is 8)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES:
        raise FormatError(f"{where}: corrupt safetensors file: header length {n} is over the {MAX_HEADER_BYTES}-byte "
                          f"limit")
    if 8 + n > len(data):
        raise FormatError(f"{where}: corrupt safetensors file: header length {n} runs past the end of the "
                          f"{len(data)}-byte file")
    raw = data[8:8 + n]
    if not raw.lstrip(b" ").startswith(b"{"):
        raise FormatError(f"{where}: corrupt safetensors file: the header is not a JSON object")
    header = json_safe.loads(raw, f"{where}: corrupt safetensors header", HEADER_LIMITS)
    if not isinstance(header, dict):
        raise FormatError(f"{where}: corrupt safetensors file: the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise FormatError(f"{where}: __metadata__: expected an object of strings")
    body = memoryview(data)[8 + n:]
    spans = []
    out: dict[str, tuple[str, np.ndarray]] = {}
    for name, info in header.items():
        tag, shape, begin, end = _entry(name, info, where, len(body))
        spans.append((begin, end, name))
        rumus_name, storage = _READ[tag]
        if tag == "BOOL" and bytes(body[begin:end]).strip(b"\x00\x01"):
            raise FormatError(f"{where}: tensor '{name}': BOOL data holds bytes other than 0 and 1")
        arr = np.frombuffer(body[begin:end], dtype=np.dtype(storage)).reshape(shape)
        out[name] = (rumus_name, arr.astype(arr.dtype.newbyteorder("="), copy=True))
    spans.sort()
    covered = 0
    for begin, end, name in spans:
        if begin != covered:
            what = "overlaps another tensor" if begin < covered else f"leaves bytes {covered}..{begin} unused"
            raise FormatError(f"{where}: corrupt safetensors file: tensor '{name}' {what}")
        covered = end
    if covered != len(body):
        raise FormatError(f"{where}: corrupt safetensors file: {len(body) - covered} bytes after the last tensor")
    return out, dict(metadata)


def load_file(path: str | os.PathLike[str], device: Any = None) -> dict[str, Tensor]:
    """{name: Tensor} of a safetensors file; MissingFile if absent, FormatError if malformed."""
    from .._creation import from_storage
    arrays, _ = parse(read_regular_file(path), os.fspath(path))
    return {k: from_storage(arr, _dtype(name), device) for k, (name, arr) in arrays.items()}


def _dtype(name: str) -> DType:
    return parse_dtype(name)

"""rumus.save / rumus.load: whole checkpoints (nested dicts, lists, tuples, numbers, strings, tensors).

The format is a zip (stored, not compressed) holding `rumus_checkpoint/tree.json` — the object tree, where
every tensor is a reference {"tensor": i, "dtype", "shape", "requires_grad"} — and one raw little-endian
payload `rumus_checkpoint/data/<i>` per tensor. Loading parses JSON and copies bytes: nothing in the file
can name code to run, unlike a pickle. `load` also reads PyTorch's `torch.save` files (through the
restricted unpickler in torch_pickle.py) and plain safetensors files, so `rumus.load(path)` opens all three.

Writes to a path are atomic (temporary file next to the target, then rename), so a crash mid-save leaves
the previous checkpoint intact.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections.abc import Mapping
from typing import IO, Any, Union

import numpy as np

from rumus_contracts import DTypeError, FormatError, RumusError, parse_dtype

from ..tensor import Tensor
from .files import atomic_write

FileLike = Union[str, "os.PathLike[str]", IO[bytes]]
_ROOT = "rumus_checkpoint"
_FORMAT_VERSION = 1


# ---- encoding ------------------------------------------------------------------------------------------
class _Encoder:
    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self._seen: dict[int, int] = {}  # the same tensor saved twice is stored once

    def node(self, obj: Any, where: str) -> Any:
        if isinstance(obj, np.generic):
            obj = obj.item()  # numpy scalars (np.float32 losses, np.int64 counters) save as Python numbers
        if obj is None or isinstance(obj, (bool, str)):
            return obj if not isinstance(obj, str) else {"str": obj}
        if isinstance(obj, int):
            return {"int": str(obj)}  # as text: JSON readers may round integers beyond 2**53
        if isinstance(obj, float):
            return {"float": repr(obj)} if not math.isfinite(obj) else obj
        if isinstance(obj, Tensor):
            return self._tensor(obj, where)
        if isinstance(obj, np.ndarray):
            raise RumusError(f"save: {where} is a numpy array; wrap it with rumus.from_numpy to save it")
        if isinstance(obj, Mapping):
            return {"dict": [[self.node(k, f"{where} key"), self.node(v, f"{where}[{k!r}]")] for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"tuple": [self.node(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return {"list": [self.node(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        raise RumusError(f"save: {where} is a {type(obj).__name__}; a checkpoint holds only tensors, dicts, "
                         f"lists, tuples, numbers, strings, bools and None (save its state_dict() instead)")

    def _tensor(self, t: Tensor, where: str) -> dict[str, Any]:
        if t.dtype.is_packed:
            raise DTypeError(f"save: {where} has the packed dtype {t.dtype}, which checkpoints do not hold yet; "
                             f"dequantize it first")
        key = self._seen.get(id(t))
        if key is None:
            host = np.ascontiguousarray(t._storage.backend.to_numpy(t._arg)).reshape(t.shape)
            key = len(self.payloads)
            self.payloads.append(host.astype(host.dtype.newbyteorder("<"), copy=False).tobytes())
            self._seen[id(t)] = key
        return {"tensor": key, "dtype": t.dtype.name, "shape": list(t.shape), "requires_grad": t.requires_grad}


def save(obj: Any, f: FileLike) -> None:
    """Write `obj` (a state_dict, or any nesting of dicts/lists/tuples of tensors, numbers, strings)."""
    enc = _Encoder()
    tree = {"format": "rumus-checkpoint", "version": _FORMAT_VERSION, "root": enc.node(obj, "the object")}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{_ROOT}/tree.json", json.dumps(tree))
        for i, data in enumerate(enc.payloads):
            z.writestr(f"{_ROOT}/data/{i}", data)
    if isinstance(f, (str, os.PathLike)):
        atomic_write(f, buf.getvalue())
    else:
        f.write(buf.getvalue())


# ---- decoding ------------------------------------------------------------------------------------------
class _Decoder:
    def __init__(self, z: zipfile.ZipFile, device: Any, name: str) -> None:
        self.z, self.device, self.name = z, device, name
        self._cache: dict[int, Tensor] = {}

    def node(self, n: Any) -> Any:
        if n is None or isinstance(n, (bool, float)):
            return n
        if isinstance(n, int):
            return n
        if not isinstance(n, dict) or len(n) < 1:
            raise FormatError(f"{self.name}: corrupt checkpoint tree (unexpected {type(n).__name__})")
        if "tensor" in n:
            return self._tensor(n)
        (kind, v), = n.items()
        if kind == "str" and isinstance(v, str):
            return v
        if kind == "int":
            return int(v)
        if kind == "float":
            return float(v)
        if kind == "list":
            return [self.node(x) for x in v]
        if kind == "tuple":
            return tuple(self.node(x) for x in v)
        if kind == "dict":
            return {self.node(k): self.node(x) for k, x in v}
        raise FormatError(f"{self.name}: corrupt checkpoint tree (unknown node kind {kind!r})")

    def _tensor(self, n: dict[str, Any]) -> Tensor:
        from .._creation import from_storage
        key = int(n["tensor"])
        if key in self._cache:
            return self._cache[key]
        try:
            dtype = parse_dtype(n["dtype"])
            shape = tuple(int(s) for s in n["shape"])
            raw = self.z.read(f"{_ROOT}/data/{key}")
        except (KeyError, RumusError, TypeError, ValueError) as exc:
            raise FormatError(f"{self.name}: corrupt checkpoint (tensor {key}: {exc})") from None
        np_dtype = dtype.numpy.newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * np_dtype.itemsize:
            raise FormatError(f"{self.name}: tensor {key} holds {len(raw)} bytes, its shape {shape} and dtype "
                              f"{dtype} need {count * np_dtype.itemsize}")
        host = np.frombuffer(raw, dtype=np_dtype).astype(dtype.numpy).reshape(shape)
        t = from_storage(host, dtype, self.device)
        if n.get("requires_grad"):
            t.requires_grad_(True)
        self._cache[key] = t
        return t


def _read_bytes(f: FileLike) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        try:
            with open(name, "rb") as fh:
                return fh.read(), name
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise RumusError(f"cannot read {name}: {exc}") from None
    return f.read(), getattr(f, "name", "<file object>")


def load(f: FileLike, map_location: Any = None, weights_only: bool = True, device: Any = None) -> Any:
    """Read what `save` wrote, a PyTorch `torch.save` file (zip or legacy), or a safetensors file.

    Nothing in the file is executed: PyTorch pickles go through an unpickler that admits only tensors,
    containers and numbers (PyTorch's weights_only rule); `weights_only=False` is refused for that reason.
    `map_location` (PyTorch's name) or `device` picks the device the tensors land on.
    """
    if not weights_only:
        raise RumusError("load(weights_only=False) would run arbitrary code from the file; RUMUS never does. "
                         "Save plain state_dicts (tensors, containers, numbers) and load them with the default")
    dev = device if device is not None else _device_of(map_location)
    data, name = _read_bytes(f)
    if data[:4] == b"PK\x03\x04":
        z = zipfile.ZipFile(io.BytesIO(data))
        names = z.namelist()
        if f"{_ROOT}/tree.json" in names:
            return _load_rumus(z, dev, name)
        from .torch_pickle import load_torch_zip
        return load_torch_zip(z, dev, name)
    if data[:1] == b"\x80":  # a pickle protocol opcode: PyTorch's legacy (pre-1.6) format
        from .torch_pickle import load_torch_legacy
        return load_torch_legacy(data, dev, name)
    if len(data) >= 9 and data[8:9] == b"{":  # safetensors: 8-byte header length, then a JSON header
        return _load_safetensors(data, dev, name)
    raise FormatError(f"{name}: not a RUMUS checkpoint, a PyTorch checkpoint or a safetensors file")


def _load_rumus(z: zipfile.ZipFile, dev: Any, name: str) -> Any:
    try:
        tree = json.loads(z.read(f"{_ROOT}/tree.json"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"{name}: corrupt checkpoint tree: {exc}") from None
    if not isinstance(tree, dict) or tree.get("format") != "rumus-checkpoint":
        raise FormatError(f"{name}: not a RUMUS checkpoint")
    if tree.get("version") != _FORMAT_VERSION:
        raise FormatError(f"{name}: checkpoint format version {tree.get('version')} is not supported by this "
                          f"RUMUS (it reads version {_FORMAT_VERSION}); upgrade rumus")
    return _Decoder(z, dev, name).node(tree["root"])


def _load_safetensors(data: bytes, dev: Any, name: str) -> dict[str, Tensor]:
    from safetensors.numpy import load as st_load

    from .._creation import from_numpy
    try:
        arrays = st_load(data)
    except Exception as exc:  # safetensors raises its own error types for corrupt headers/data
        raise FormatError(f"{name}: corrupt safetensors file: {exc}") from None
    return {k: from_numpy(np.asarray(v, order="C"), device=dev) for k, v in arrays.items()}


def _device_of(map_location: Any) -> Any:
    if map_location is None or callable(map_location) or isinstance(map_location, dict):
        return None  # PyTorch's callable/dict forms remap CUDA devices; RUMUS loads onto the default device
    text = str(map_location)
    return None if text.startswith("cuda") else map_location

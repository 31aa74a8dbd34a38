"""rumus.save / rumus.load: whole checkpoints (nested dicts, lists, tuples, numbers, strings, tensors).

The format is a zip (stored, not compressed) holding `rumus_checkpoint/tree.json` — the object tree, where
every tensor is a reference {"tensor": i, "dtype", "shape", "requires_grad"} — and one raw little-endian
payload `rumus_checkpoint/data/<i>` per tensor. Loading parses JSON and copies bytes: nothing in the file
can name code to run, unlike a pickle. `load` also reads PyTorch's `torch.save` files (through the
restricted unpickler in torch_pickle.py) and plain safetensors files, so `rumus.load(path)` opens all three.

Reading is strict: a path must be a regular file (no FIFO, no /dev/zero), the zip is read through
`zip_safe` (bounded inflation, FormatError on any damage), tree.json through `json_safe` (bounded depth),
and every node, tensor field and payload size is checked before anything is allocated; a hostile or
damaged file is a FormatError naming the problem. Writes to a path are atomic (temporary file next to
the target, then rename), so a crash mid-save leaves the previous checkpoint intact; a failed write
(disk full) is a FileError.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
from collections.abc import Mapping
from typing import IO, Any, Union

import numpy as np

from rumus_contracts import DTypeError, FileError, FormatError, RumusError, parse_dtype

from ..tensor import Tensor
from . import json_safe, limits
from .files import atomic_write, read_regular_file
from .zip_safe import SafeZip

FileLike = Union[str, "os.PathLike[str]", IO[bytes]]
_ROOT = "rumus_checkpoint"
_FORMAT_VERSION = 1


# ---- encoding ------------------------------------------------------------------------------------------
def payload_bytes(t: Tensor) -> bytes:
    """A tensor's logical contents as the raw little-endian bytes a checkpoint stores for it."""
    host = np.ascontiguousarray(t._storage.backend.to_numpy(t._arg)).reshape(t.shape)
    return host.astype(host.dtype.newbyteorder("<"), copy=False).tobytes()


class _NotATree(Exception):
    """The object holds something a JSON tree cannot (a module, a numpy array): save pickles it instead."""


class _Encoder:
    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self._seen: dict[int, int] = {}  # the same tensor saved twice is stored once

    def node(self, obj: Any, where: str, depth: int = 0) -> Any:
        if depth > limits.MAX_TREE_DEPTH:
            raise RumusError(f"save: {where} is nested more than {limits.MAX_TREE_DEPTH} containers deep "
                             f"(rumus.io.limits.MAX_TREE_DEPTH); a checkpoint this deep could not be loaded")
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
            raise _NotATree(where)
        if isinstance(obj, Mapping):
            return {"dict": [[self.node(k, f"{where} key", depth + 1), self.node(v, f"{where}[{k!r}]", depth + 1)]
                             for k, v in obj.items()]}
        if isinstance(obj, tuple):
            return {"tuple": [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return {"list": [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]}
        raise _NotATree(where)

    def _tensor(self, t: Tensor, where: str) -> dict[str, Any]:
        if t.dtype.is_packed:
            raise DTypeError(f"save: {where} has the packed dtype {t.dtype}, which checkpoints do not hold yet; "
                             f"dequantize it first")
        key = self._seen.get(id(t))
        if key is None:
            key = len(self.payloads)
            self.payloads.append(payload_bytes(t))
            self._seen[id(t)] = key
        return {"tensor": key, "dtype": t.dtype.name, "shape": list(t.shape), "requires_grad": t.requires_grad}


def save(obj: Any, f: FileLike) -> None:
    """Write `obj`, as torch.save takes it. A state_dict, or any nesting of dicts/lists/tuples of tensors,
    numbers and strings, is stored as a JSON tree with raw tensor payloads (it loads with the default
    weights_only=True). Anything else — a whole module, a numpy array, an object of your own — is pickled
    with its tensors lifted out, and loads only with `load(f, weights_only=False)`, as under torch."""
    enc = _Encoder()
    extra: dict[str, bytes] = {}
    try:
        root = enc.node(obj, "the object")
    except _NotATree:
        from .object_pickle import dumps
        enc = _Encoder()
        extra[f"{_ROOT}/object.pkl"] = dumps(obj, enc.payloads)
        root = {"pickle": "object.pkl"}
    tree = {"format": "rumus-checkpoint", "version": _FORMAT_VERSION, "root": root}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{_ROOT}/tree.json", json.dumps(tree))
        for member, blob in extra.items():
            z.writestr(member, blob)
        for i, data in enumerate(enc.payloads):
            z.writestr(f"{_ROOT}/data/{i}", data)
    if isinstance(f, (str, os.PathLike)):
        atomic_write(f, buf.getvalue())
        return
    try:
        f.write(buf.getvalue())
    except OSError as exc:
        if isinstance(exc, RumusError):
            raise
        raise FileError(f"{getattr(f, 'name', '<file object>')}: cannot write it: {exc}") from None


# ---- decoding ------------------------------------------------------------------------------------------
_TREE_LIMITS = json_safe.JsonLimits(max_bytes=limits.MAX_METADATA_BYTES, max_depth=3 * limits.MAX_TREE_DEPTH + 8,
                                    max_int_digits=20)
_INT_TEXT = re.compile(r"-?[0-9]+")
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_TENSOR_FIELDS = {"tensor", "dtype", "shape", "requires_grad"}


class _Decoder:
    """tree.json -> objects. Every node is checked for its exact form; a tensor key referenced twice must
    carry the same dtype and shape, and yields the same tensor (shared references stay shared)."""

    def __init__(self, z: SafeZip, device: Any, name: str) -> None:
        self.z, self.device, self.name = z, device, name
        self._cache: dict[int, tuple[Any, Tensor]] = {}

    def _bad(self, what: str) -> FormatError:
        return FormatError(f"{self.name}: corrupt checkpoint tree ({what})")

    def node(self, n: Any) -> Any:
        if n is None or isinstance(n, (bool, float)):
            return n
        if isinstance(n, int):
            return n
        if not isinstance(n, dict) or not n:
            raise self._bad(f"unexpected {type(n).__name__}")
        if "tensor" in n:
            return self._tensor(n)
        if len(n) != 1:
            raise self._bad(f"a node with the keys {sorted(n)[:4]}")
        (kind, v), = n.items()
        if kind == "str" and isinstance(v, str):
            return v
        if kind == "int" and isinstance(v, str) and len(v) <= limits.MAX_INT_DIGITS and _INT_TEXT.fullmatch(v):
            return int(v)
        if kind == "float" and isinstance(v, str) and v in _NON_FINITE:
            return _NON_FINITE[v]
        if kind in ("list", "tuple") and isinstance(v, list):
            items = [self.node(x) for x in v]
            return items if kind == "list" else tuple(items)
        if kind == "dict" and isinstance(v, list):
            out: dict[Any, Any] = {}
            for pair in v:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise self._bad("a dict item that is not a [key, value] pair")
                key = self.node(pair[0])
                try:
                    seen = key in out
                except TypeError:
                    raise self._bad(f"a dict key of type {type(key).__name__}, which cannot be a key") from None
                if seen:
                    raise self._bad(f"the dict key {key!r:.40} appears twice")
                out[key] = self.node(pair[1])
            return out
        raise self._bad(f"a {kind!r:.20} node holding a {type(v).__name__}")

    def _tensor(self, n: dict[str, Any]) -> Tensor:
        from .._creation import from_storage
        if set(n) != _TENSOR_FIELDS:
            raise self._bad(f"a tensor node with the keys {sorted(n)[:6]}")
        key, dtype_name, shape_list, requires_grad = n["tensor"], n["dtype"], n["shape"], n["requires_grad"]
        if type(key) is not int or key < 0 or not isinstance(dtype_name, str) or type(requires_grad) is not bool:
            raise self._bad("a tensor node's key (an int >= 0), dtype (a name) or requires_grad (a bool) is wrong")
        if not (isinstance(shape_list, list) and len(shape_list) <= limits.MAX_RANK
                and all(type(d) is int and 0 <= d < 2**63 for d in shape_list)):
            raise self._bad(f"tensor {key}: shape {str(shape_list)[:60]} is not at most {limits.MAX_RANK} "
                            f"non-negative ints")
        signature = (dtype_name, tuple(shape_list), requires_grad)
        if key in self._cache:
            if self._cache[key][0] != signature:
                raise self._bad(f"tensor {key} is referenced with two different dtypes, shapes or requires_grad")
            return self._cache[key][1]
        try:
            dtype = parse_dtype(dtype_name)
        except RumusError as exc:
            raise self._bad(f"tensor {key}: {exc}") from None
        if dtype.is_packed:
            raise self._bad(f"tensor {key}: packed dtype {dtype}, which checkpoints do not hold")
        if requires_grad and not dtype.is_floating:
            raise self._bad(f"tensor {key}: a {dtype} tensor requires grad")
        shape = tuple(shape_list)
        np_dtype = dtype.numpy.newbyteorder("<")
        need = math.prod(shape) * np_dtype.itemsize
        member = f"{_ROOT}/data/{key}"
        if self.z.size(member) != need:
            raise FormatError(f"{self.name}: tensor {key} holds {self.z.size(member)} bytes, its shape {shape} and "
                              f"dtype {dtype} need {need}")
        raw = self.z.read(member)
        host = np.frombuffer(raw, dtype=np_dtype)
        if dtype.name == "bool" and host.size and int(host.view(np.uint8).max()) > 1:
            raise FormatError(f"{self.name}: tensor {key}: bool data holds bytes other than 0 and 1")
        t = from_storage(host.astype(dtype.numpy).reshape(shape), dtype, self.device)
        if requires_grad:
            t.requires_grad_(True)
        self._cache[key] = (signature, t)
        return t


def _read_bytes(f: FileLike) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        return read_regular_file(f), os.fspath(f)
    try:
        data = f.read()
    except OSError as exc:
        if isinstance(exc, RumusError):
            raise
        raise FileError(f"{getattr(f, 'name', '<file object>')}: cannot read it: {exc}") from None
    if not isinstance(data, (bytes, bytearray)):
        raise RumusError("load: the file object must be opened in binary mode ('rb')")
    return bytes(data), str(getattr(f, "name", "<file object>"))


def load(f: FileLike, map_location: Any = None, weights_only: bool = True, device: Any = None) -> Any:
    """Read what `save` wrote, a PyTorch `torch.save` file (zip or legacy), or a safetensors file.

    By default (weights_only=True, torch 2.6+'s default) nothing in the file is executed: PyTorch pickles go
    through an unpickler that admits only tensors, containers and numbers, and a RUMUS file that holds a
    pickled object (`save(model)`) is refused with WeightsOnlyRefused (an UnpicklingError, as torch's).
    `weights_only=False` is the explicit opt-in that unpickles such an object — it runs code the file names,
    so only for files from a source you trust. `map_location` (PyTorch's name) or `device` picks the device
    the tensors land on.
    """
    dev = device if device is not None else _device_of(map_location)
    data, name = _read_bytes(f)
    if data[:4] == b"PK\x03\x04":
        z = SafeZip(data, name)
        if f"{_ROOT}/tree.json" in z.names():
            return _load_rumus(z, dev, name, weights_only)
        from .torch_pickle import load_torch_zip
        return load_torch_zip(z, dev, name)
    if data[:1] == b"\x80":  # a pickle protocol opcode: PyTorch's legacy (pre-1.6) format
        from .torch_pickle import load_torch_legacy
        return load_torch_legacy(data, dev, name)
    if len(data) >= 9 and data[8:9] == b"{":  # safetensors: 8-byte header length, then a JSON header
        return _load_safetensors(data, dev, name)
    raise FormatError(f"{name}: not a RUMUS checkpoint, a PyTorch checkpoint or a safetensors file")


def _load_rumus(z: SafeZip, dev: Any, name: str, weights_only: bool = True) -> Any:
    raw = z.read(f"{_ROOT}/tree.json", limits.MAX_METADATA_BYTES, "rumus.io.limits.MAX_METADATA_BYTES")
    tree = json_safe.loads(raw, f"{name}: {_ROOT}/tree.json", _TREE_LIMITS)
    if not isinstance(tree, dict) or tree.get("format") != "rumus-checkpoint" or "root" not in tree:
        raise FormatError(f"{name}: not a RUMUS checkpoint")
    if tree.get("version") != _FORMAT_VERSION:
        raise FormatError(f"{name}: checkpoint format version {tree.get('version')} is not supported by this "
                          f"RUMUS (it reads version {_FORMAT_VERSION}); upgrade rumus")
    root = tree["root"]
    if isinstance(root, dict) and set(root) == {"pickle"}:
        return _load_pickled(z, dev, name, weights_only)
    return _Decoder(z, dev, name).node(root)


def _load_pickled(z: SafeZip, dev: Any, name: str, weights_only: bool) -> Any:
    from .object_pickle import REFUSAL, WeightsOnlyRefused, loads
    if weights_only:
        raise WeightsOnlyRefused(REFUSAL.format(name=name))
    member = f"{_ROOT}/object.pkl"
    if member not in z.names():
        raise FormatError(f"{name}: the checkpoint names a pickled object but holds no {member}")
    data = z.read(member, limits.MAX_METADATA_BYTES, "rumus.io.limits.MAX_METADATA_BYTES")

    def payload(key: int, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        np_dtype = dtype.numpy.newbyteorder("<")
        entry = f"{_ROOT}/data/{key}"
        need = math.prod(shape) * np_dtype.itemsize
        if entry not in z.names() or z.size(entry) != need:
            raise FormatError(f"{name}: tensor {key} of the pickled object does not match its payload")
        return np.frombuffer(z.read(entry), dtype=np_dtype).astype(dtype.numpy).reshape(shape)

    return loads(data, payload, dev, name)


def _load_safetensors(data: bytes, dev: Any, name: str) -> dict[str, Tensor]:
    from .._creation import from_storage
    from .safetensors import parse  # the hardened reader: bfloat16 and float16 bit for bit
    arrays, _ = parse(data, name)
    return {k: from_storage(arr, parse_dtype(dtype), dev) for k, (dtype, arr) in arrays.items()}


def _device_of(map_location: Any) -> Any:
    if map_location is None or callable(map_location) or isinstance(map_location, dict):
        return None  # PyTorch's callable/dict forms remap CUDA devices; RUMUS loads onto the default device
    text = str(map_location)
    return None if text.startswith("cuda") else map_location

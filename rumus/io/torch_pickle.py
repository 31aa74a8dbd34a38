"""Read PyTorch's `torch.save` files without PyTorch and without running code from them.

A torch checkpoint is a pickle, and a pickle may name any callable to run (`os.system` included). This
unpickler admits, by name, only what PyTorch's own `weights_only=True` rule admits for tensors: the tensor
and parameter rebuild functions, the typed storage classes, `OrderedDict`, `torch.Size`, `torch.device`,
dtypes and plain containers and numbers. Anything else raises FormatError before it is called — torch is
never imported, so even its allowed names are our own stand-ins.

Two layouts: the zip format (PyTorch >= 1.6: `<dir>/data.pkl` + one file `<dir>/data/<key>` per storage)
and the legacy format (several pickles in a row followed by the raw storages).
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from rumus_contracts import FormatError, RumusError, parse_dtype

from ..tensor import Tensor

# torch storage class name -> (RUMUS dtype name, numpy dtype of the bytes in the file)
_STORAGES: dict[str, tuple[str, str]] = {
    "FloatStorage": ("float32", "<f4"), "DoubleStorage": ("float64", "<f8"), "HalfStorage": ("float16", "<f2"),
    "BFloat16Storage": ("bfloat16", "<u2"), "LongStorage": ("int64", "<i8"), "IntStorage": ("int32", "<i4"),
    "ShortStorage": ("int16", "<i2"), "CharStorage": ("int8", "i1"), "ByteStorage": ("uint8", "u1"),
    "BoolStorage": ("bool", "?"),
}
_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
           "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64",
           "int32": "int32", "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8",
           "bool": "bool"}


class _StorageType:
    """Stand-in for torch.FloatStorage & co.: only carries the element type."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype, self.file_dtype = _STORAGES[name]


class _Storage:
    """A storage read from the file: a flat host array in the file's element type."""

    def __init__(self, array: np.ndarray | None, storage_type: _StorageType, key: str = "") -> None:
        self.array, self.type, self.key = array, storage_type, key  # array None: read later (legacy files)


class _Pending:
    """A tensor of a legacy file whose storage bytes come after the pickle: rebuilt once they are read."""

    def __init__(self, storage: _Storage, args: tuple[Any, ...]) -> None:
        self.storage, self.args = storage, args
        self.parameter: bool | None = None  # a Parameter's requires_grad, once wrapped in one


class _Size(tuple):  # type: ignore[type-arg]
    """torch.Size -> a plain tuple."""

    def __new__(cls, *args: Any) -> tuple[int, ...]:  # type: ignore[misc]
        return tuple(*args)


def _rebuild_tensor_v2(storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
                       requires_grad: bool = False, backward_hooks: Any = None, metadata: Any = None) -> Any:
    from .._creation import from_storage
    if not isinstance(storage, _Storage):
        raise FormatError("torch checkpoint: a tensor is rebuilt from something that is not a storage")
    if storage.array is None:
        return _Pending(storage, (offset, size, stride, requires_grad))
    arr = storage.array
    itemsize = arr.dtype.itemsize
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise FormatError(f"torch checkpoint: bad tensor layout size={size} stride={stride} offset={offset}")
    if all(size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= arr.size:
            raise FormatError(f"torch checkpoint: a tensor of size {size} reads past the end of its storage "
                              f"({arr.size} elements)")
        view = np.lib.stride_tricks.as_strided(arr[offset:], size, tuple(s * itemsize for s in stride))
    else:
        view = np.zeros(size, arr.dtype)
    dtype = parse_dtype(storage.type.dtype)
    t = from_storage(np.array(view, dtype=dtype.numpy, order="C"), dtype, _DEVICE[0])
    return t.requires_grad_(True) if requires_grad and dtype.is_floating else t


def _rebuild_parameter(data: Any, requires_grad: bool, backward_hooks: Any = None, *state: Any) -> Any:
    from ..nn.parameter import Parameter
    if isinstance(data, _Pending):
        data.parameter = bool(requires_grad)
        return data
    if not isinstance(data, Tensor):
        raise FormatError("torch checkpoint: a parameter is rebuilt from something that is not a tensor")
    return Parameter(data, requires_grad=requires_grad)


def _device(spec: Any, index: Any = None) -> str:
    return str(spec) if index is None else f"{spec}:{index}"


_DEVICE: list[Any] = [None]  # the device tensors are loaded onto, set per load (loads are not reentrant)


def _allowed(module: str, name: str) -> Any:
    if module == "collections" and name == "OrderedDict":
        return OrderedDict
    if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
        return _rebuild_tensor_v2
    if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
        return _rebuild_parameter
    if module == "torch" and name in _STORAGES:
        return _StorageType(name)
    if module == "torch" and name == "Size":
        return _Size
    if module == "torch" and name == "device":
        return _device
    if module == "torch" and name in _DTYPES:
        return parse_dtype(_DTYPES[name])
    if module == "builtins" and name in ("set", "frozenset", "complex", "slice"):
        return {"set": set, "frozenset": frozenset, "complex": complex, "slice": slice}[name]
    return None


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], load_storage: Callable[[_StorageType, str, int], np.ndarray | None],
                 name: str) -> None:
        super().__init__(file)
        self._load_storage, self._name = load_storage, name
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        obj = _allowed(module, name)
        if obj is None:
            raise FormatError(f"{self._name}: the checkpoint names '{module}.{name}', which is not a tensor, "
                              f"container or number; refusing to load it (nothing from it was run). Only load "
                              f"files you trust with PyTorch itself, and re-save plain state_dicts")
        return obj

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise FormatError(f"{self._name}: unknown persistent reference {pid!r:.80}")
        stype, key, numel = pid[1], str(pid[2]), int(pid[4])
        if key not in self._storages:
            if pid[5:6] not in ((), (None,)):
                raise FormatError(f"{self._name}: storage views of pre-1.0 PyTorch files are not supported; "
                                  f"re-save the checkpoint with a recent PyTorch")
            self._storages[key] = _Storage(self._load_storage(stype, key, numel), stype, key)
        return self._storages[key]


def _unpickle(data: bytes, loader: Callable[[_StorageType, str, int], np.ndarray | None], name: str,
              device: Any) -> tuple[Any, _RestrictedUnpickler]:
    u = _RestrictedUnpickler(io.BytesIO(data), loader, name)
    _DEVICE[0] = device
    try:
        return u.load(), u
    except (RumusError, FileNotFoundError):
        raise
    except Exception as exc:  # a truncated or corrupt pickle raises many kinds of errors
        raise FormatError(f"{name}: corrupt PyTorch checkpoint: {type(exc).__name__}: {exc}") from None
    finally:
        _DEVICE[0] = None


def load_torch_zip(z: zipfile.ZipFile, device: Any, name: str) -> Any:
    pkls = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise FormatError(f"{name}: a zip file that is neither a RUMUS checkpoint nor a PyTorch one "
                          f"(no single <dir>/data.pkl)")
    root = pkls[0][: -len("data.pkl")]
    if f"{root}byteorder" in z.namelist() and z.read(f"{root}byteorder").strip() != b"little":
        raise FormatError(f"{name}: big-endian PyTorch checkpoints are not supported")

    def storage(stype: _StorageType, key: str, numel: int) -> np.ndarray:
        try:
            raw = z.read(f"{root}data/{key}")
        except KeyError:
            raise FormatError(f"{name}: storage {key} is missing from the archive") from None
        arr = np.frombuffer(raw, dtype=np.dtype(stype.file_dtype))
        if arr.size < numel:
            raise FormatError(f"{name}: storage {key} holds {arr.size} elements, {numel} were promised")
        return arr

    return _unpickle(z.read(pkls[0]), storage, name, device)[0]


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def load_torch_legacy(data: bytes, device: Any, name: str) -> Any:
    """Pre-1.6 layout: pickles of magic, protocol, sys_info, the object, the storage keys; then each storage
    as an int64 element count and its bytes. Storages come after the object, so tensors are rebuilt last."""
    f = io.BytesIO(data)
    pending: dict[str, tuple[_StorageType, int]] = {}

    def later(stype: _StorageType, key: str, numel: int) -> np.ndarray | None:
        pending[key] = (stype, numel)
        return None

    def next_pickle(what: str) -> Any:
        u = _RestrictedUnpickler(f, later, name)
        _DEVICE[0] = device
        try:
            return u.load()
        except (RumusError, FileNotFoundError):
            raise
        except Exception as exc:
            raise FormatError(f"{name}: not a readable PyTorch checkpoint ({what}: {type(exc).__name__}: "
                              f"{exc})") from None
        finally:
            _DEVICE[0] = None

    if next_pickle("magic number") != _LEGACY_MAGIC:
        raise FormatError(f"{name}: not a PyTorch checkpoint (wrong magic number)")
    next_pickle("protocol version")
    info = next_pickle("system info")
    if isinstance(info, dict) and not info.get("little_endian", True):
        raise FormatError(f"{name}: big-endian PyTorch checkpoints are not supported")
    obj = next_pickle("object")
    keys = next_pickle("storage keys")
    arrays: dict[str, np.ndarray] = {}
    for key in keys:
        stype, numel = pending[str(key)]
        dt = np.dtype(stype.file_dtype)
        head = f.read(8)
        count = int(np.frombuffer(head, "<i8")[0]) if len(head) == 8 else -1
        raw = f.read(max(count, 0) * dt.itemsize)
        if count < numel or len(raw) != count * dt.itemsize:
            raise FormatError(f"{name}: storage {key} is truncated")
        arrays[str(key)] = np.frombuffer(raw, dtype=dt)
    _DEVICE[0] = device
    try:
        return _resolve(obj, arrays)
    finally:
        _DEVICE[0] = None


def _resolve(obj: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(obj, _Pending):
        st = obj.storage
        t = _rebuild_tensor_v2(_Storage(arrays[st.key], st.type), *obj.args)
        return t if obj.parameter is None else _rebuild_parameter(t, obj.parameter)
    if isinstance(obj, OrderedDict):
        return OrderedDict((k, _resolve(v, arrays)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: _resolve(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve(v, arrays) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_resolve(v, arrays) for v in obj)
    return obj

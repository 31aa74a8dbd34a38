"""Read PyTorch's `torch.save` files without PyTorch and without running code from them.

A torch checkpoint is a pickle, and a pickle may name any callable to run (`os.system` included) or
rewrite any object it can reach. It is read here by `pickle_vm.RestrictedUnpickler` (an opcode
interpreter, not `pickle.Unpickler`) with the globals table below: the tensor and parameter rebuild
functions, the typed storage classes, `OrderedDict`, `torch.Size`, `torch.device`, dtypes and plain
containers and numbers. torch is never imported, so even its allowed names are our own stand-ins.

Every tensor is checked against its storage before it exists: size, stride and offset non-negative,
the last element it reads inside the storage, a view that reads elements more than once bounded by
`limits.MAX_VIEW_ELEMENTS`. Tensors are views of one RUMUS storage per file storage (as torch.load gives),
so a stride-0 expand stays a view and tensors that shared a storage still share it.

Two layouts: the zip format (PyTorch >= 1.6: `<dir>/data.pkl` + one entry `<dir>/data/<key>` per
storage) and the legacy format (several pickles in a row followed by the raw storages).
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from rumus_contracts import DType, FormatError, parse_dtype

from ..tensor import Tensor
from . import limits
from .pickle_vm import RestrictedUnpickler, check_exhausted
from .zip_safe import SafeZip

# torch storage class name -> (RUMUS dtype name, numpy dtype of the bytes in the file)
_STORAGES: dict[str, tuple[str, str]] = {
    "FloatStorage": ("float32", "<f4"), "DoubleStorage": ("float64", "<f8"), "HalfStorage": ("float16", "<f2"),
    "BFloat16Storage": ("bfloat16", "<u2"), "LongStorage": ("int64", "<i8"), "IntStorage": ("int32", "<i4"),
    "ShortStorage": ("int16", "<i2"), "CharStorage": ("int8", "i1"), "ByteStorage": ("uint8", "u1"),
    "BoolStorage": ("bool", "u1"),
}
_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
           "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64",
           "int32": "int32", "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8",
           "bool": "bool"}

def _bytearray(*args: Any) -> bytearray:
    """bytearray of bytes (or latin-1 text) only: bytearray(2**40) would allocate a terabyte."""
    if len(args) == 1 and isinstance(args[0], bytes):
        return bytearray(args[0])
    if len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
        return bytearray(args[0].encode("latin-1"))
    raise FormatError("torch checkpoint: bytearray is allowed only of bytes")


_BUILTINS: dict[str, Any] = {"set": set, "frozenset": frozenset, "complex": complex, "slice": slice,
                             "bytearray": _bytearray}


class _StorageType:
    """Stand-in for torch.FloatStorage & co.: only carries the element type (a fresh one per GLOBAL)."""

    __slots__ = ("name", "dtype", "file_dtype")

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype, self.file_dtype = _STORAGES[name]


class _Storage:
    """A storage of the file: its element type, element count and (once read) a RUMUS tensor over it."""

    def __init__(self, stype: _StorageType, key: str, numel: int, base: Tensor | None) -> None:
        self.type, self.key, self.numel, self.base = stype, key, numel, base  # base None: not read yet


class _Deferred:
    """What a tensor of a legacy file is on the first pass, before its storage bytes are read."""


def _size(*args: Any) -> tuple[int, ...]:
    """torch.Size(seq) -> a plain tuple of ints."""
    if len(args) != 1 or not isinstance(args[0], (tuple, list)):
        raise FormatError("torch checkpoint: torch.Size takes one sequence")
    return tuple(_int(v, "a torch.Size dim") for v in args[0])


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise FormatError(f"torch checkpoint: {what} is a {type(v).__name__}, not an int")
    return v


def _device(spec: Any, index: Any = None) -> str:
    if not isinstance(spec, str) or (index is not None and type(index) is not int):
        raise FormatError("torch checkpoint: a torch.device of something that is not a device name")
    return spec if index is None else f"{spec}:{index}"


def _encode(text: Any, encoding: Any = "latin1") -> bytes:
    """_codecs.encode as protocol-2 pickles use it for bytes objects: latin-1 text -> bytes only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise FormatError("torch checkpoint: _codecs.encode is allowed only for latin-1 bytes")
    return text.encode("latin-1")


def check_layout(size: Any, stride: Any, offset: Any, numel_storage: int, where: str) -> tuple[tuple[int, ...],
                                                                                                tuple[int, ...], int]:
    """size/stride/offset as ints, every element they address inside a storage of `numel_storage`."""
    if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)):
        raise FormatError(f"{where}: a tensor's size and stride must be sequences")
    size_t = tuple(_int(s, "a tensor's size") for s in size)
    stride_t = tuple(_int(s, "a tensor's stride") for s in stride)
    offset = _int(offset, "a tensor's storage offset")
    if len(size_t) != len(stride_t) or len(size_t) > limits.MAX_RANK:
        raise FormatError(f"{where}: a tensor of size {size_t!s:.80} has stride {stride_t!s:.80} (rank at most "
                          f"{limits.MAX_RANK}, one stride per dim)")
    if any(s < 0 for s in size_t) or any(s < 0 for s in stride_t) or offset < 0:
        raise FormatError(f"{where}: a tensor has a negative size, stride or offset (size={size_t!s:.80} "
                          f"stride={stride_t!s:.80} offset={offset})")
    numel = math.prod(size_t)
    if numel == 0:
        if offset > numel_storage:
            raise FormatError(f"{where}: an empty tensor's offset {offset} lies past its {numel_storage}-element "
                              f"storage")
        return size_t, stride_t, offset
    last = offset + sum((n - 1) * s for n, s in zip(size_t, stride_t))
    if last >= numel_storage:
        raise FormatError(f"{where}: a tensor of size {size_t!s:.80}, stride {stride_t!s:.80}, offset {offset} reads "
                          f"element {last}, past the end of its {numel_storage}-element storage")
    if numel > numel_storage and numel > limits.MAX_VIEW_ELEMENTS:
        raise FormatError(f"{where}: a tensor of size {size_t!s:.80} ({numel} elements) re-reads its "
                          f"{numel_storage}-element storage; views that large are refused "
                          f"(rumus.io.limits.MAX_VIEW_ELEMENTS = {limits.MAX_VIEW_ELEMENTS})")
    return size_t, stride_t, offset


class _Reader:
    """One load: the globals table, the storage rule and the rebuild functions, bound to this file."""

    def __init__(self, name: str, device: Any, read_storage: Callable[[_StorageType, str, int], np.ndarray | None]):
        self.name, self.device, self._read_storage = name, device, read_storage
        self.storages: dict[tuple[str, str], _Storage] = {}

    # ---- globals -----------------------------------------------------------------------------------
    def globals_table(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self.rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return self.rebuild_parameter
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        if module == "torch" and name == "Size":
            return _size
        if module == "torch" and name == "device":
            return _device
        if module == "torch" and name in _DTYPES:
            return parse_dtype(_DTYPES[name])  # a value only: no opcode can change it (see pickle_vm)
        if module == "_codecs" and name == "encode":
            return _encode
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return _BUILTINS[name]
        return None

    # ---- storages ----------------------------------------------------------------------------------
    def persistent_load(self, pid: Any) -> _Storage:
        if not (type(pid) is tuple and len(pid) in (5, 6) and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and type(pid[4]) is int):
            raise FormatError(f"{self.name}: unknown persistent reference {pid!r:.80} (only storages are allowed)")
        stype, key, numel = pid[1], pid[2], pid[4]
        if len(pid) == 6 and pid[5] is not None:
            raise FormatError(f"{self.name}: storage views of pre-1.0 PyTorch files are not supported; "
                              f"re-save the checkpoint with a recent PyTorch")
        if numel < 0:
            raise FormatError(f"{self.name}: storage {key!r:.40} has a negative size {numel}")
        found = self.storages.get((key, stype.name))
        if found is not None:
            if found.numel != numel:
                raise FormatError(f"{self.name}: storage {key!r:.40} is referenced with sizes {found.numel} "
                                  f"and {numel}")
            return found
        array = self._read_storage(stype, key, numel)
        base = None
        if array is not None:
            dtype = parse_dtype(stype.dtype)
            if dtype.name == "bool" and array.size and int(array.max()) > 1:
                raise FormatError(f"{self.name}: bool storage {key!r:.40} holds bytes other than 0 and 1")
            from .._creation import from_storage
            base = from_storage(np.asarray(array, dtype=dtype.numpy), dtype, self.device)
        storage = _Storage(stype, key, numel, base)
        self.storages[(key, stype.name)] = storage
        return storage

    # ---- rebuild functions --------------------------------------------------------------------------
    def rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> Tensor | _Deferred:
        if not isinstance(storage, _Storage):
            raise FormatError(f"{self.name}: a tensor is rebuilt from something that is not a storage")
        size_t, stride_t, off = check_layout(size, stride, offset, storage.numel, self.name)
        if type(requires_grad) is not bool:
            raise FormatError(f"{self.name}: a tensor's requires_grad is a {type(requires_grad).__name__}")
        dtype: DType = parse_dtype(storage.type.dtype)
        if requires_grad and not dtype.is_floating:
            raise FormatError(f"{self.name}: a {dtype} tensor requires grad; only floating-point tensors can")
        if storage.base is None:
            return _Deferred()
        if math.prod(size_t) == 0:  # reads nothing: its own empty storage, whatever offset the file names
            from .._creation import from_storage
            t = from_storage(np.zeros(size_t, dtype=dtype.numpy), dtype, self.device)
        else:
            from .._tensor_base import make_tensor
            t = make_tensor(storage.base._storage, size_t, stride_t, off)
        return t.requires_grad_(True) if requires_grad else t

    def rebuild_parameter(self, data: Any, requires_grad: Any, backward_hooks: Any = None, *state: Any) -> Any:
        if isinstance(data, _Deferred):
            return data
        if not isinstance(data, Tensor):
            raise FormatError(f"{self.name}: a parameter is rebuilt from something that is not a tensor")
        if type(requires_grad) is not bool:
            raise FormatError(f"{self.name}: a parameter's requires_grad is a {type(requires_grad).__name__}")
        if requires_grad and not data.dtype.is_floating:
            raise FormatError(f"{self.name}: a {data.dtype} parameter requires grad; only floating-point ones can")
        from ..nn.parameter import Parameter
        return Parameter(data, requires_grad=requires_grad)

    def unpickle(self, data: bytes | memoryview, pos: int = 0) -> tuple[Any, RestrictedUnpickler]:
        u = RestrictedUnpickler(data, pos, self.globals_table, self.persistent_load, self.name)
        return u.load(), u


def load_torch_zip(z: SafeZip, device: Any, name: str) -> Any:
    pkls = [n for n in z.names() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise FormatError(f"{name}: a zip file that is neither a RUMUS checkpoint nor a PyTorch one "
                          f"(no single <dir>/data.pkl)")
    root = pkls[0][: -len("data.pkl")]
    if f"{root}byteorder" in z.names() and z.read(f"{root}byteorder", 64, "a byteorder entry").strip() != b"little":
        raise FormatError(f"{name}: big-endian PyTorch checkpoints are not supported")

    def storage(stype: _StorageType, key: str, numel: int) -> np.ndarray:
        member = f"{root}data/{key}"
        dt = np.dtype(stype.file_dtype)
        need = numel * dt.itemsize
        if z.size(member) < need:
            raise FormatError(f"{name}: storage {key!r:.40} holds {z.size(member)} bytes, its {numel} "
                              f"{stype.dtype} elements need {need}")
        raw = z.read(member)
        return np.frombuffer(raw, dtype=dt, count=numel)

    reader = _Reader(name, device, storage)
    data = z.read(pkls[0], limits.MAX_METADATA_BYTES, "rumus.io.limits.MAX_METADATA_BYTES")
    obj, u = reader.unpickle(data)
    check_exhausted(u, "the checkpoint's pickle")
    return obj


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def load_torch_legacy(data: bytes, device: Any, name: str) -> Any:
    """Pre-1.6 layout: pickles of magic, protocol, sys_info, the object, the storage keys; then each storage
    as an int64 element count and its bytes. Storages come after the object, so the object's pickle is read
    twice: once to learn which storages it uses, then, with them read, to rebuild it (shared references
    and all) exactly as the zip format is."""
    view = memoryview(data)

    def no_storage(stype: _StorageType, key: str, numel: int) -> None:
        return None

    def plain(pos: int) -> tuple[Any, int]:
        obj, u = _Reader(name, device, no_storage).unpickle(view, pos)
        return obj, u.end

    magic, pos = plain(0)
    if magic != _LEGACY_MAGIC:
        raise FormatError(f"{name}: not a PyTorch checkpoint (wrong magic number)")
    _, pos = plain(pos)
    info, pos = plain(pos)
    if isinstance(info, dict) and not info.get("little_endian", True):
        raise FormatError(f"{name}: big-endian PyTorch checkpoints are not supported")
    object_at = pos
    first = _Reader(name, device, no_storage)
    pos = first.unpickle(view, object_at)[1].end
    keys, pos = plain(pos)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        raise FormatError(f"{name}: corrupt PyTorch checkpoint (the storage keys are not distinct strings)")
    used = {key: st for (key, _), st in first.storages.items()}
    if set(used) != set(keys):  # torch writes exactly the storages the object uses
        raise FormatError(f"{name}: the checkpoint's storage key list does not match the storages it uses")
    arrays: dict[str, bytes] = {}
    for key in keys:
        if len(data) - pos < 8:
            raise FormatError(f"{name}: storage {key!r:.40} is truncated")
        (count,) = struct.unpack_from("<q", data, pos)
        itemsize = np.dtype(used[key].type.file_dtype).itemsize
        if count < 0 or count * itemsize > len(data) - pos - 8:
            raise FormatError(f"{name}: storage {key!r:.40} claims {count} elements; the file has "
                              f"{len(data) - pos - 8} bytes left")
        arrays[key] = data[pos + 8: pos + 8 + count * itemsize]
        pos += 8 + count * itemsize
    if pos != len(data):
        raise FormatError(f"{name}: {len(data) - pos} bytes follow the last storage (a corrupt or spliced file)")

    def storage(stype: _StorageType, key: str, numel: int) -> np.ndarray:
        raw = arrays.get(key)
        dt = np.dtype(stype.file_dtype)
        if raw is None or len(raw) < numel * dt.itemsize:
            raise FormatError(f"{name}: storage {key!r:.40} holds fewer than the {numel} elements promised")
        return np.frombuffer(raw, dtype=dt, count=numel)

    second = _Reader(name, device, storage)
    return second.unpickle(view, object_at)[0]


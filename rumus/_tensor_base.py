"""The data of a tensor and how one is made, below everything that computes with tensors.

`TensorBase` holds a tensor's slots: Storage (buffer, device, dtype, version), layout (shape, strides,
offset) and autograd state, and the layout accessors that dispatch and the op functions read (dtype,
ndim, `_arg`, ...). `tensor.Tensor` subclasses it with the methods that call the op modules (`_math`,
`_views`, `_inplace`); those in turn build their results here with `make_tensor`. So the core
imports downward only: storage -> this module -> dispatch -> op functions -> tensor.Tensor
(tests/core/test_import_layers.py keeps it so).

Below tensor.py, `Tensor` names the real class for the type checker and `TensorBase` at run time: every
tensor is a `tensor.Tensor` (make_tensor builds only those), so `isinstance(x, Tensor)` answers the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rumus_contracts import Device, DType, RumusError, TensorArg, contiguous_strides

from ._storage import Storage

if TYPE_CHECKING:
    from .autograd.graph import Node
    from .tensor import Tensor as Tensor


class TensorBase:
    __slots__ = ("_storage", "shape", "_strides", "_offset", "_requires_grad", "grad", "_grad_fn", "_output_nr",
                 "_base", "_view_version", "_arg_cache", "_hooks", "_sig", "__weakref__")

    _storage: Storage
    shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _offset: int
    _requires_grad: bool
    grad: Tensor | None
    _grad_fn: Node | None
    _output_nr: int
    _base: Tensor | None
    # For a view made in grad mode: the storage version its grad_fn belongs to. When an in-place op
    # has changed the base since (the version moved on), grad_fn and requires_grad are recomputed
    # from the base's current history on the next read (PyTorch's rule). -1: not such a view.
    _view_version: int
    _arg_cache: TensorArg | None
    _hooks: list[Any] | None  # a leaf's hooks (autograd/hooks.py)
    # The layout signature the planned paths key on (layout_sig): one int for (backend, device, shape,
    # strides, dtype), 0 until first asked. Code that changes a tensor's layout or storage in place resets it
    # to 0, as it resets _arg_cache.
    _sig: int

    # ---- layout and metadata: what dispatch and the op functions read (they sit below tensor.Tensor) ----
    @property
    def dtype(self) -> DType:
        return self._storage.dtype

    @property
    def device(self) -> Device:
        return self._storage.device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self.shape[dim]

    def stride(self, dim: int | None = None) -> Any:
        return self._strides if dim is None else self._strides[dim]

    def storage_offset(self) -> int:
        return self._offset

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def element_size(self) -> int:
        return self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise RumusError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def _version(self) -> int:
        """The version counter shared with every view of the same storage (bumped by in-place ops)."""
        return self._storage.version

    def is_contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self._strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    @property
    def _arg(self) -> TensorArg:
        a = self._arg_cache
        if a is None:
            a = self._arg_cache = TensorArg(self._storage.buffer, self.shape, self._strides, self._offset, self.dtype)
        return a

    def _expanded_arg(self, shape: tuple[int, ...]) -> TensorArg:
        if not self.shape:  # a scalar: stride 0 everywhere
            return TensorArg(self._storage.buffer, shape, _ZEROS[len(shape)], self._offset, self._storage.dtype)
        lead = len(shape) - len(self.shape)
        strides = [0] * lead + [0 if s == 1 and shape[i + lead] != 1 else st
                                for i, (s, st) in enumerate(zip(self.shape, self._strides))]
        return TensorArg(self._storage.buffer, shape, tuple(strides), self._offset, self.dtype)


_ZEROS = [(0,) * n for n in range(65)]

if not TYPE_CHECKING:
    Tensor = TensorBase  # the run-time answer to isinstance (see the module's docstring)

# The class make_tensor builds: tensor.Tensor, set once by tensor.py when it is defined (late binding,
# so that this module need not import the op modules that Tensor's methods call).
_tensor_class: Any = TensorBase


def bind_tensor_class(cls: type[TensorBase]) -> None:
    global _tensor_class
    _tensor_class = cls


_strides_cache: dict[tuple[int, ...], tuple[int, ...]] = {}


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    s = _strides_cache.get(shape)
    if s is None:
        s = contiguous_strides(shape)
        if len(_strides_cache) < 65536:
            _strides_cache[shape] = s
    return s


def _init(t: TensorBase, storage: Storage, shape: tuple[int, ...], strides: tuple[int, ...] | None,
          offset: int) -> None:
    t._storage = storage
    t.shape = shape
    t._strides = strides if strides is not None else _contiguous(shape)
    t._offset = offset
    t._requires_grad = False
    t.grad = None
    t._grad_fn = None
    t._output_nr = 0
    t._base = None
    t._view_version = -1
    t._arg_cache = None
    t._hooks = None
    t._sig = 0


_new = object.__new__

# (backend, device, shape, strides, dtype name) -> its layout signature. Numbers are never reused (a full
# table only stops remembering), so a signature names one layout for the life of the process and a plan
# keyed by signatures never meets another layout under its key.
_sigs: dict[tuple[Any, ...], int] = {}
_next_sig = [1]


def sig_of(backend: Any, device: Device, shape: tuple[int, ...], strides: tuple[int, ...], dtype: DType) -> int:
    key = (backend, device, shape, strides, dtype.name)
    s = _sigs.get(key)
    if s is None:
        s = _next_sig[0]
        _next_sig[0] = s + 1
        if len(_sigs) < 65536:
            _sigs[key] = s
    return s


def layout_sig(t: TensorBase) -> int:
    """t's layout signature (TensorBase._sig), computed and kept on first use."""
    st = t._storage
    s = t._sig = sig_of(st.backend, st.device, t.shape, t._strides, st.dtype)
    return s


def fresh_tensor(buffer: Any, device: Device, dtype: DType, backend: Any, numel: int, shape: tuple[int, ...],
                 strides: tuple[int, ...], arg: TensorArg, sig: int = 0) -> Tensor:
    """A new contiguous tensor at offset 0 on a new Storage of `buffer`, whose kernel argument `arg` is already
    made: the dispatcher's planned path, which knows the strides and builds the argument for the kernel call
    anyway, and the layout signature (sig_of) from its plan. The Storage is filled here as Storage.__init__
    would (one call less per op)."""
    storage: Storage = _new(Storage)
    storage.buffer = buffer
    storage.device = device
    storage.dtype = dtype
    storage.backend = backend
    storage.numel = numel
    storage.version = 0
    t: Tensor = _new(_tensor_class)
    t._storage = storage
    t.shape = shape
    t._strides = strides
    t._offset = 0
    t._requires_grad = False
    t.grad = None
    t._grad_fn = None
    t._output_nr = 0
    t._base = None
    t._view_version = -1
    t._arg_cache = arg
    t._hooks = None
    t._sig = sig
    return t


def make_tensor(storage: Storage, shape: tuple[int, ...], strides: tuple[int, ...] | None = None,
                offset: int = 0) -> Tensor:
    t: Tensor = _new(_tensor_class)
    _init(t, storage, shape, strides, offset)
    return t

"""Tensor = Storage (buffer, device, dtype, version) + Layout (shape, strides, offset) + autograd state.

The data (the slots) live in `_tensor_base.TensorBase`, below every op module; this module is the top
of the core: it imports the op modules and binds them as methods. Methods are thin: the work lives in
`_math` (ops with user-facing signatures), `_views` (metadata-only views that keep autograd) and
`_dispatch` (the per-op path).
"""

from __future__ import annotations

import copy

from collections.abc import Callable, Iterator, Sequence
from types import FunctionType
from typing import TYPE_CHECKING, Any

import numpy as np

from rumus_contracts import (
    AutogradError, DType, DTypeError, RumusError, parse_dtype,
)

from . import _creation, _inplace, _math, _views
from .ops import _ops as _OPS
from .ops import get as _op
from .autograd import hooks as _hooks
from .autograd.hooks import RemovableHandle
from ._tensor_base import TensorBase, _init as _init, bind_tensor_class, make_tensor as make_tensor

if TYPE_CHECKING:
    from .autograd.graph import Node


class Tensor(TensorBase):
    """A tensor: the data of `TensorBase` and the methods that compute with it."""

    __slots__ = ()

    def __init__(self, data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> None:
        from ._creation import tensor as _tensor
        src = _tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        _init(self, src._storage, src.shape, src._strides, src._offset)
        self.requires_grad = requires_grad

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    # ---- autograd state (views recompute theirs after an in-place change of their base) -------------
    @property
    def requires_grad(self) -> bool:
        if self._view_version >= 0 and self._view_version != self._storage.version:
            _inplace.refresh_view(self)
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._requires_grad = value

    @property
    def grad_fn(self) -> Node | None:
        if self._view_version >= 0 and self._view_version != self._storage.version:
            _inplace.refresh_view(self)
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, node: Node | None) -> None:
        self._grad_fn = node

    # ---- host access --------------------------------------------------------------------------
    def _refuse_fixed(self, what: str) -> None:
        if self.dtype.is_fixed:
            raise DTypeError(f"{what} is refused on a fixed-point tensor ({self.dtype}): its values are raw "
                             f"int16; use fixed_i16_data() to read them")

    def numpy(self) -> np.ndarray:
        """A host copy (the only sync point on GPU backends). bfloat16 widens to float32."""
        self._refuse_fixed("numpy()")
        if self.dtype.is_packed:
            raise DTypeError(f"numpy() on a packed {self.dtype} tensor: dequantize it first")
        if self.requires_grad and self.grad_fn is not None:
            pass  # like .detach().numpy(); RUMUS does not force the detach
        from . import _dispatch
        if _dispatch._capture is not None:  # rm.compile refuses data-dependent Python while capturing
            _dispatch._capture.host_read("reading tensor values (.item(), .numpy(), .tolist(), bool(), float())")
        # the copy is as big as the logical shape (an expanded view's stride-0 dims included): check first
        _creation.check_size("numpy()", self.shape, 4 if self.dtype.name == "bfloat16" else self.element_size())
        with _creation.host_memory("numpy()"):
            arr = self._storage.backend.to_numpy(self._arg)
        if self.dtype.name == "bfloat16":
            wide = arr.astype(np.uint32)
            wide <<= 16  # in place: a 0-d result stays an array (`<<` would give a numpy scalar)
            arr = wide.view(np.float32)
        return arr

    def fixed_i16_data(self) -> np.ndarray:
        """The raw int16 values of a fixed-point tensor (q means q / 2**scale_log2)."""
        if not self.dtype.is_fixed:
            raise DTypeError(f"fixed_i16_data() needs a fixed-point tensor, this one is {self.dtype}")
        return self._storage.backend.to_numpy(self._arg)

    def __reduce__(self) -> Any:
        # pickling (DataLoader workers, multiprocessing, torch.save-style whole objects) copies the data by
        # value through host memory; as torch's, the result is a leaf and .grad is not carried
        from ._creation import _rebuild
        host = self._storage.backend.to_numpy(self._arg)
        return (_rebuild, (host, self.dtype, str(self.device), self.requires_grad))

    def share_memory_(self) -> Tensor:
        """Move this CPU tensor's storage into shared memory (in place), so processes that receive it
        through rumus.multiprocessing write the same numbers (Hogwild); a no-op if it already is."""
        from ._shared_memory import share_  # late binding: shared memory sits above the tensor class
        return share_(self)

    def is_shared(self) -> bool:
        """Whether this tensor's storage is in shared memory (share_memory_)."""
        from ._shared_memory import is_shared  # late binding: see share_memory_
        return is_shared(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A copy with its own storage, on the same device, requires_grad kept, `.grad` deep-copied (torch's
        rule); only leaves can be copied, as in torch."""
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment; detach() it first, or deep-copy the leaves it came from")
        hit = memo.get(id(self))
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        from .autograd.grad_mode import no_grad
        with no_grad():
            new = self._copy_as_leaf()
        memo[id(self)] = new
        if self.grad is not None and type(self) is Tensor:
            new.grad = copy.deepcopy(self.grad, memo)
        return new

    def _copy_as_leaf(self) -> Tensor:
        """This tensor's data in new storage as a leaf with the same requires_grad (Parameter overrides)."""
        new = self.clone()
        return new.requires_grad_(True) if self.requires_grad else new

    def item(self) -> Any:
        if self.numel() != 1:
            raise RumusError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        self._refuse_fixed("item()")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        self._refuse_fixed("tolist()")
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating:
            raise RumusError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RumusError(f"the truth value of a tensor with {self.numel()} elements is ambiguous; "
                             f"use .any() or .all()")
        return bool(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr.astype(dtype) if dtype is not None else arr

    def __repr__(self) -> str:
        if self.dtype.is_packed:
            body = f"<{self.dtype} data, shape {self.shape}>"
        else:
            body = np.array2string(self.numpy(), separator=", ", prefix="tensor(", precision=4)
        extra = []
        if self.dtype.name not in ("float32", "int64", "bool") or self.dtype.is_packed:
            extra.append(f"dtype={self.dtype}")  # like torch: the default dtypes go unnamed
        if self.device.backend != "cpu":
            extra.append(f"device='{self.device}'")
        if self.grad_fn is not None:
            extra.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extra.append("requires_grad=True")
        return f"tensor({body}{', ' if extra else ''}{', '.join(extra)})"

    __hash__ = object.__hash__

    def __iter__(self) -> Iterator[Tensor]:
        if not self.shape:
            raise RumusError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield self[i]

    # ---- autograd --------------------------------------------------------------------------------
    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        from .autograd import backward
        backward([self], [gradient] if gradient is not None else None, retain_graph, create_graph)

    def detach(self) -> Tensor:
        t = make_tensor(self._storage, self.shape, self._strides, self._offset)
        t._sig = self._sig  # the same storage and layout
        return t

    def detach_(self) -> Tensor:
        if self._base is not None and self._view_version >= 0:
            raise AutogradError("detach_() on a view: it shares its base's history; use detach() instead")
        self._grad_fn = None
        self._requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and not self.dtype.is_floating:
            raise AutogradError(f"only floating-point tensors can require gradients, not {self.dtype}"
                                + (" (fixed-point tensors are inference-only)" if self.dtype.is_fixed else ""))
        if not requires_grad and self.grad_fn is not None:
            raise AutogradError("requires_grad_(False) on a non-leaf tensor; use detach() instead")
        self.requires_grad = requires_grad
        return self

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """PyTorch's tensor hook: called with the gradient flowing into this tensor (a leaf's before it is
        accumulated into .grad, an op output's once its total is known); a Tensor it returns replaces the
        gradient. Returns a handle whose .remove() takes the hook out."""
        return _hooks.add(self._hook_list(), "grad", hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Called with this leaf after its .grad was accumulated (PyTorch's name and semantics)."""
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        return _hooks.add(self._hook_list(), "post", hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in .grad on backward (a no-op on leaves, as in PyTorch)."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if not self.retains_grad:
            _hooks.add(self._hook_list(), "retain", _hooks.retainer(self))

    @property
    def retains_grad(self) -> bool:
        node = self.grad_fn
        hooks = (node.tensor_hooks or {}).get(self._output_nr) if node is not None else None
        return any(e.kind == "retain" for e in hooks or ())

    def _hook_list(self) -> list[Any]:
        """Where this tensor's hooks live: the leaf itself, or its grad_fn's slot for this output."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self.grad_fn
        if node is None:
            if self._hooks is None:
                self._hooks = []
            return self._hooks
        if node.tensor_hooks is None:
            node.tensor_hooks = {}
        return node.tensor_hooks.setdefault(self._output_nr, [])

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        if value.shape != self.shape or value.dtype != self.dtype:
            raise RumusError(f".data assignment needs the same shape and dtype: {value.shape}/{value.dtype} vs "
                             f"{self.shape}/{self.dtype}")
        self._storage, self._strides, self._offset = value._storage, value._strides, value._offset
        self._arg_cache, self._sig = None, 0
        self._base, self._view_version = None, -1  # new storage: no longer a view of the old base

    # ---- conversion ------------------------------------------------------------------------------
    def to(self, *args: Any, dtype: Any = None, device: Any = None) -> Tensor:
        for a in args:
            if isinstance(a, (DType, type)) or (isinstance(a, str) and _is_dtype_name(a)):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                device = a
        out = self
        if dtype is not None and parse_dtype(dtype) != self.dtype:
            if self.dtype.is_fixed or parse_dtype(dtype).is_fixed:
                raise DTypeError(f"cannot cast {self.dtype} to {parse_dtype(dtype)}: fixed-point tensors hold raw "
                                 f"int16 codes and never meet floats (SPEC E); build them with rumus.fixed.tensor, "
                                 f"read them with fixed_i16_data(), requantize with rumus.fixed.requantize")
            if self.dtype.is_packed:
                raise DTypeError(f"cannot cast packed {self.dtype} words to {parse_dtype(dtype)}: their values are "
                                 f"codes, not numbers; dequantize (QLinear.dequantized_weight(), "
                                 f"rumus.ops.q8_dequantize / int4_dequantize). Moving them (.to(device)) is fine")
            out = _math.cast(out, parse_dtype(dtype))
        if device is not None:
            out = _math.to_device(out, device)
        return out

    def type(self, dtype: Any) -> Tensor:
        return self.to(dtype=dtype)

    def cpu(self) -> Tensor:
        return self.to(device="cpu")

    def contiguous(self) -> Tensor:
        return self if self.is_contiguous() else _math.clone(self)

    def clone(self) -> Tensor:
        return _math.clone(self)

    # ---- views (metadata only, autograd kept) ------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        return _views.reshape(self, _shape_args(shape))

    def view(self, *shape: Any) -> Tensor:
        return _views.view(self, _shape_args(shape))

    def view_as(self, other: Tensor) -> Tensor:
        return _views.view(self, other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return _views.reshape(self, other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _views.flatten(self, start_dim, end_dim)

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        return _views.unflatten(self, dim, tuple(sizes))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _views.transpose(self, dim0, dim1)

    def swapaxes(self, dim0: int, dim1: int) -> Tensor:
        return _views.transpose(self, dim0, dim1)

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise RumusError(f"t() expects a tensor with <= 2 dims, got shape {self.shape}; use transpose()")
        return self if self.ndim < 2 else _views.transpose(self, 0, 1)

    @property
    def T(self) -> Tensor:
        return _views.permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:
        return _views.matrix_transpose(self)

    def permute(self, *dims: Any) -> Tensor:
        return _views.permute(self, _shape_args(dims))

    def expand(self, *shape: Any) -> Tensor:
        return _views.expand(self, _shape_args(shape))

    def expand_as(self, other: Tensor) -> Tensor:
        return _views.expand(self, other.shape)

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        return _views.expand(self, tuple(shape))

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        return _views.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Tensor:
        return _views.unsqueeze(self, dim)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        return _views.narrow(self, dim, start, length)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _views.chunk(self, chunks, dim)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        return _views.split(self, split_size, dim)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        return tuple(_views.select(self, dim, i) for i in range(self.shape[dim]))

    def __getitem__(self, index: Any) -> Tensor:
        return _views.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        _inplace.setitem(self, index, value)

    # ---- math: every method forwards to rumus._math; the arithmetic operators, the ops themselves ----------
    def __add__(self, o: Any) -> Tensor: return (_OPS.get("add") or _op("add")).binary(self, o)
    def __radd__(self, o: Any) -> Tensor: return (_OPS.get("add") or _op("add")).binary(o, self)
    def __sub__(self, o: Any) -> Tensor: return (_OPS.get("sub") or _op("sub")).binary(self, o)
    def __rsub__(self, o: Any) -> Tensor: return (_OPS.get("sub") or _op("sub")).binary(o, self)
    def __mul__(self, o: Any) -> Tensor: return (_OPS.get("mul") or _op("mul")).binary(self, o)
    def __rmul__(self, o: Any) -> Tensor: return (_OPS.get("mul") or _op("mul")).binary(o, self)
    def __truediv__(self, o: Any) -> Tensor: return (_OPS.get("div") or _op("div")).binary(self, o)
    def __rtruediv__(self, o: Any) -> Tensor: return (_OPS.get("div") or _op("div")).binary(o, self)
    def __pow__(self, o: Any) -> Tensor: return _math.pow(self, o)
    def __rpow__(self, o: Any) -> Tensor: return _math.pow(o, self)
    def __matmul__(self, o: Tensor) -> Tensor:
        if isinstance(o, Tensor) and len(self.shape) == 2 and len(o.shape) == 2 and self.shape[1] == o.shape[0]:
            return (_OPS.get("matmul") or _op("matmul"))(self, o)  # what _math.matmul does for these, directly
        return _math.matmul(self, o)

    def __rmatmul__(self, o: Tensor) -> Tensor: return _math.matmul(o, self)
    def __neg__(self) -> Tensor: return (_OPS.get("neg") or _op("neg"))(self)
    def __pos__(self) -> Tensor: return self
    def __abs__(self) -> Tensor: return _math.abs(self)
    def __eq__(self, o: Any) -> Tensor: return _math.eq(self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return _math.ne(self, o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Tensor: return _math.lt(self, o)
    def __le__(self, o: Any) -> Tensor: return _math.le(self, o)
    def __gt__(self, o: Any) -> Tensor: return _math.gt(self, o)
    def __ge__(self, o: Any) -> Tensor: return _math.ge(self, o)
    def __invert__(self) -> Tensor: return _math.logical_not(self)
    def __and__(self, o: Any) -> Tensor: return _math.logical_and(self, o)
    def __or__(self, o: Any) -> Tensor: return _math.logical_or(self, o)
    # expression-table operators (H3): Python's // and % rules, ^ as logical xor on bools
    def __floordiv__(self, o: Any) -> Tensor: return _math.floor_divide(self, o)
    def __rfloordiv__(self, o: Any) -> Tensor: return _math.floor_divide(o, self)
    def __mod__(self, o: Any) -> Tensor: return _math.remainder(self, o)
    def __rmod__(self, o: Any) -> Tensor: return _math.remainder(o, self)
    def __xor__(self, o: Any) -> Tensor: return _math.logical_xor(self, o)
    def __iadd__(self, o: Any) -> Tensor: return _math.add_(self, o)
    def __isub__(self, o: Any) -> Tensor: return _math.sub_(self, o)
    def __imul__(self, o: Any) -> Tensor: return _math.mul_(self, o)
    def __itruediv__(self, o: Any) -> Tensor: return _math.div_(self, o)

    def __getattr__(self, name: str) -> Any:
        # every function in rumus._math taking the tensor first is also a method (x.exp(), x.sum(1) ...)
        fn = _math.METHODS.get(name)
        if fn is None:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        if isinstance(fn, FunctionType):  # a method from now on: later lookups skip this fallback
            setattr(Tensor, name, fn)
            return getattr(self, name)
        return lambda *a, **k: fn(self, *a, **k)

    # Defined last: inside the class body these names shadow the builtins used in annotations above.
    def float(self) -> Tensor:
        return self.to(dtype="float32")

    def double(self) -> Tensor:
        return self.to(dtype="float64")

    def half(self) -> Tensor:
        return self.to(dtype="float16")

    def bfloat16(self) -> Tensor:
        return self.to(dtype="bfloat16")

    def long(self) -> Tensor:
        return self.to(dtype="int64")

    def int(self) -> Tensor:
        return self.to(dtype="int32")

    def bool(self) -> Tensor:
        return self.to(dtype="bool")


bind_tensor_class(Tensor)  # make_tensor (below every op module) builds this class


def _shape_args(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(s) for s in args[0])
    return tuple(int(s) for s in args)


def _is_dtype_name(s: str) -> bool:
    try:
        parse_dtype(s)
        return True
    except RumusError:
        return False


"""Binds the PyTorch-compat functions (rumus/_composites_torch.py, rumus/_torch_api.py) as Tensor methods
and as rumus.* functions. Kept apart from rumus/tensor.py so the Tensor class stays the core's own; this
module only adds names the class does not define."""

from __future__ import annotations

from typing import Any

from rumus_contracts import parse_dtype

from . import _composites_torch as C
from . import _creation
from . import _math as M
from . import _torch_api as A
from . import _torch_functions as TF
from . import _torch_tensor_methods as TM
from . import _torch_habits as TH
from .tensor import Tensor


def _new(factory: Any) -> Any:
    def method(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        out: Tensor = factory(*size, dtype=dtype or self.dtype, device=device or self.device,
                              requires_grad=requires_grad)
        return out
    return method


def new_full(self: Tensor, size: Any, fill_value: Any, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    return _creation.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)


def new_tensor(self: Tensor, data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    if isinstance(data, Tensor):
        data = data.detach().numpy()
    return _creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                            requires_grad=requires_grad)


def __format__(self: Tensor, spec: str) -> str:
    """f"{loss:.4f}" formats a one-element tensor's value, as PyTorch does; other tensors use repr."""
    if self.ndim == 0 or (spec and self.numel() == 1):
        return format(self.item(), spec)
    return format(repr(self), spec)


def type_as(self: Tensor, other: Tensor) -> Tensor:
    return self.to(dtype=other.dtype)


def is_floating_point(self: Tensor) -> bool:
    return self.dtype.is_floating


METHODS: dict[str, Any] = {
    "new_zeros": _new(_creation.zeros), "new_ones": _new(_creation.ones), "new_empty": _new(_creation.empty),
    "new_full": new_full, "new_tensor": new_tensor, "__format__": __format__, "type_as": type_as,
    "is_floating_point": is_floating_point, "equal": A.equal, "sum": A.sum, "prod": A.prod, "nonzero": A.nonzero,
    "tril": C.tril, "triu": C.triu, "flip": C.flip, "fliplr": C.fliplr, "flipud": C.flipud, "roll": C.roll,
    "repeat": C.repeat, "repeat_interleave": C.repeat_interleave, "cumsum": C.cumsum, "cumprod": C.cumprod,
    "norm": C.norm, "scatter": C.scatter, "scatter_": C.scatter_, "scatter_add_": C.scatter_add_,
    "index_add_": C.index_add_, "masked_fill": C.masked_fill, "masked_fill_": C.masked_fill_,
    "take_along_dim": C.take_along_dim, "multinomial": C.multinomial, "argsort": C.argsort, "sort": C.sort,
    "msort": C.msort, "topk": C.topk, "kthvalue": C.kthvalue,
    "where": lambda self, condition, other: A.where(condition, self, other),
    **TM.METHODS,
}

FUNCTIONS: dict[str, Any] = {
    "sum": A.sum, "prod": A.prod, "where": A.where, "nonzero": A.nonzero, "equal": A.equal, "as_tensor": A.as_tensor,
    "is_tensor": A.is_tensor, "is_floating_point": A.is_floating_point, "get_default_dtype": A.get_default_dtype,
    "get_num_threads": A.get_num_threads, "set_num_threads": A.set_num_threads,
    "cuda": A.cuda, "backends": A.backends, "mps": A.mps, "accelerator": A.accelerator,
    "tril": C.tril, "triu": C.triu, "flip": C.flip, "fliplr": C.fliplr, "flipud": C.flipud, "roll": C.roll,
    "repeat_interleave": C.repeat_interleave, "cumsum": C.cumsum, "cumprod": C.cumprod, "norm": C.norm,
    "scatter": C.scatter, "masked_fill": C.masked_fill, "take_along_dim": C.take_along_dim,
    "meshgrid": C.meshgrid, "einsum": C.einsum, "multinomial": C.multinomial, "argsort": C.argsort,
    "sort": C.sort, "msort": C.msort, "topk": C.topk, "kthvalue": C.kthvalue,
    **A.DTYPE_ALIASES,
    **TF.FUNCTIONS,
    **TH.FUNCTIONS,
}


def install(namespace: dict[str, Any]) -> None:
    """Add the methods to Tensor (only where the class defines nothing of that name, except the dtype-rule
    fixes `sum`/`prod`/`where`, which replace the generic method) and the functions to the rumus namespace."""
    for name, fn in METHODS.items():
        if name in ("sum", "prod", "where") or name not in vars(Tensor):
            M.METHODS[name] = fn
            if name.startswith("__") or name in vars(Tensor) or isinstance(fn, property):
                setattr(Tensor, name, fn)
    namespace.update(FUNCTIONS)
    Tensor.type = TH.tensor_type  # type: ignore[method-assign]
    from . import sparse  # late binding: the sparse layout is written with the ops installed here
    Tensor.to_sparse = sparse.to_sparse  # type: ignore[attr-defined]
    Tensor.is_sparse = False  # type: ignore[attr-defined]
    namespace.update(sparse=sparse, sparse_coo_tensor=sparse.sparse_coo_tensor, spmm=sparse.spmm)
    Tensor.__init__ = TH._tensor_init  # type: ignore[method-assign,assignment]
    C._register_composites()
    _ = parse_dtype  # dtype names such as "float" already parse (rumus.float is the same object as float32)

"""Module: registers Parameters, buffers and submodules on attribute assignment; PyTorch's names and
state_dict keys, so PyTorch / Hugging Face safetensors load unchanged."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from rumus_contracts import Device, RumusError, ShapeError, parse_dtype

from ..autograd.grad_mode import no_grad
from ..compile.host import host_region
from ..tensor import Tensor
from ..utils.hooks import RemovableHandle
from .parameter import Buffer, Parameter

# rumus.nn star-imports these.
__all__ = ["Module"]


# How many times train()/eval() flipped some module's mode (rm.compile's signature includes it).
MODE_CHANGES = [0]

class IncompatibleKeys(NamedTuple):
    """What load_state_dict returns: a (missing_keys, unexpected_keys) pair with names, as in PyTorch."""
    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer: holds parameters, buffers and submodules; `forward` defines the computation.

    Subclass it, assign layers and `Parameter`s as attributes in `__init__`, and call the module like a function.
    `parameters()`, `state_dict()`, `load_state_dict()`, `train()`/`eval()`, `to(device)` and hooks work as in
    PyTorch; state_dict keys and layouts are PyTorch's.
    """
    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    # ---- registration -------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise RumusError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        if name in self._buffers and (value is None or (isinstance(value, Tensor) and
                                                        not isinstance(value, (Parameter, Buffer)))):
            self._buffers[name] = value  # reassigning a registered buffer keeps it registered (PyTorch)
            return
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Buffer):
            self._buffers[name] = value
            if not value.persistent:
                self._non_persistent.add(name)
        elif value is None and name in self.__dict__.get("_declared_optional", ()):
            self._parameters[name] = None
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise RumusError(f"register_parameter('{name}'): expected a Parameter, got {type(param).__name__}")
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        self._modules[name] = module

    register_module = add_module

    # ---- calling ------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks")):
            return self.forward(*args, **kwargs)
        for hook in list(d["_forward_pre_hooks"].values()):
            changed = hook(self, args)
            if changed is not None:  # PyTorch's rule: a non-tuple result is the single new argument
                args = changed if isinstance(changed, tuple) else (changed,)
        out = self.forward(*args, **kwargs)
        for hook in list(d["_forward_hooks"].values()):
            changed = hook(self, args, out)
            if changed is not None:
                out = changed
        return out

    def _add_hook(self, table_name: str, hook: Callable[..., Any], prepend: bool) -> RemovableHandle:
        if table_name not in self.__dict__:  # a subclass that skipped Module.__init__'s hook tables
            object.__setattr__(self, table_name, OrderedDict())
        table = self.__dict__[table_name]
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """hook(module, args) runs before forward; returning a value replaces the positional arguments."""
        return self._add_hook("_forward_pre_hooks", hook, prepend)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False) -> RemovableHandle:
        """hook(module, args, output) runs after forward; returning a value replaces the output."""
        return self._add_hook("_forward_hooks", hook, prepend)

    # ---- traversal ----------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", memo: set[int] | None = None) -> Iterator[tuple[str, Module]]:
        memo = memo if memo is not None else set()
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        mods = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{name}" if mp else name), b

    def share_memory(self) -> Module:
        """Move every parameter and buffer into shared memory (Tensor.share_memory_), so processes given this
        module through rumus.multiprocessing train the same weights (Hogwild). Gradients are not shared."""
        for t in [*self.parameters(), *self.buffers()]:
            t.share_memory_()
        return self

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes --------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        modules = list(self.modules())
        if any(m.training != mode for m in modules):
            MODE_CHANGES[0] += 1  # rm.compile keys captures on it: a step captured in train mode never replays in eval
        for m in modules:
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    @host_region  # rm.compile re-runs it on every replay (.grad set to None is Python state)
    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            p.grad = None

    # ---- state --------------------------------------------------------------------------------
    def state_dict(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        out: OrderedDict[str, Tensor] = OrderedDict()
        for mp, m in self.named_modules(prefix.rstrip(".")):
            for name, p in m._parameters.items():
                if p is not None:
                    out[f"{mp}.{name}" if mp else name] = p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[f"{mp}.{name}" if mp else name] = b.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the existing tensors. Everything is checked before anything is written, so
        a bad state_dict leaves the module untouched. Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing key(s): {', '.join(missing)}")
            if unexpected:
                parts.append(f"unexpected key(s): {', '.join(unexpected)}")
            raise RumusError(f"load_state_dict for {type(self).__name__}: {'; '.join(parts)}. "
                             f"Pass strict=False to load the matching keys only.")
        staged = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                from .._creation import tensor
                value = tensor(value)
            if value.shape != target.shape:
                raise ShapeError(f"load_state_dict for {type(self).__name__}: size mismatch for '{key}': the "
                                 f"checkpoint has shape {value.shape}, the model expects {target.shape}")
            staged.append((target, value))
        with no_grad():
            for target, value in staged:
                target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Move/cast parameters and buffers in place (the Parameter objects stay the same, so optimizers
        that already hold them keep working)."""
        device = kwargs.get("device")
        dtype = kwargs.get("dtype")
        for a in args:
            if isinstance(a, (str, Device)) and not _is_dtype(a):
                device = a
            else:
                dtype = a
        for t in list(self.parameters()) + list(self.buffers()):
            new = t.detach()
            if dtype is not None and t.dtype.is_floating:
                new = new.to(dtype=parse_dtype(dtype))
            if device is not None:
                new = new.to(device=device)
            if new._storage is not t._storage:
                t._storage, t.shape, t._strides, t._offset = new._storage, new.shape, new._strides, new._offset
                t._arg_cache, t._sig = None, 0
                if t.grad is not None:
                    t.grad = t.grad.to(device=new.device, dtype=new.dtype)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def float(self) -> Module:
        return self.to(dtype="float32")

    def double(self) -> Module:
        return self.to(dtype="float64")

    def half(self) -> Module:  # mixed precision: train with master_weights=True (rumus/optim/_master.py)
        return self.to(dtype="float16")

    def bfloat16(self) -> Module:
        return self.to(dtype="bfloat16")

    # ---- printing -----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._modules) | set(self._buffers))


def _is_dtype(a: Any) -> bool:
    try:
        parse_dtype(a)
        return not isinstance(a, Device)
    except Exception:
        return False

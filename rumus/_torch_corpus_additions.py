"""Small torch names the corpus programs (tests/compat/corpus) and the model code docs/api_coverage.py scans
use and rumus lacked, written with core ops and installed at torch's paths: torch.normal, torch.pi,
torch.scalar_tensor, torch._assert, torch.nn.utils.weight_norm / remove_weight_norm,
torch.optim.optimizer.required, torch.nn.attention.SDPBackend / sdpa_kernel,
torch.utils.checkpoint.get_device_states / set_device_states, and torch.jit's eager-mode markers
(ignore, unused, export, is_scripting, is_tracing, Final: what model code writes so that TorchScript can
skip a function; in eager mode they change nothing), torch.fx.wrap (the same kind of marker, for symbolic
tracing), and torch.distributions' per-family module paths (torch.distributions.normal.Normal, ...).
torch.jit.script / trace are not provided: rumus
compiles with rumus.compile, and a silent identity there would claim a compilation that did not happen."""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.machinery
import math
import numbers
import sys
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

from rumus_contracts import ShapeError

from . import _creation
from .nn import attention as _attention
from .nn import utils as _nn_utils
from .nn.module import Module
from .nn.parameter import Parameter
from .optim import optimizer as _optimizer
from .tensor import Tensor


def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Any = None,
           dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """torch.normal: samples mean + std * N(0, 1), shaped by the tensor arguments (broadcast) or by `size`
    when both are numbers. Gradients flow to tensor mean / std as in torch (d/dstd is the unit sample)."""
    tensor_args = [a for a in (mean, std) if isinstance(a, Tensor)]
    if not tensor_args:
        if size is None:
            raise TypeError("normal(): with a number mean and std, give size= (as torch does)")
        if not isinstance(mean, numbers.Real) or not isinstance(std, numbers.Real):
            raise TypeError(f"normal(): mean and std must be numbers or tensors, got {type(mean).__name__}, "
                            f"{type(std).__name__}")
        if std < 0:
            raise ValueError(f"normal expects std >= 0.0, but found std {std}")
        shape = tuple(size) if not isinstance(size, int) else (size,)
        eps = _creation.randn(*shape, generator=generator, dtype=dtype, device=device)
        out = eps * std + mean
        if requires_grad:
            out.requires_grad_(True)
        return out
    if size is not None:
        raise TypeError("normal(): size= is only for number mean and std; tensors give the shape")
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        shape = _broadcast(tuple(mean.shape), tuple(std.shape))
    else:
        shape = tuple(tensor_args[0].shape)
    ref = tensor_args[0]
    eps = _creation.randn(*shape, generator=generator, dtype=ref.dtype, device=ref.device)
    sample: Tensor = mean + std * eps
    return sample


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"normal(): mean of shape {a} and std of shape {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    squares: Tensor = v * v
    if dim == -1:
        total: Tensor = squares.sum().sqrt()
        return total
    others = [d for d in range(v.dim()) if d != dim]
    norms: Tensor = squares.sum(dim=others, keepdim=True).sqrt()
    return norms


class _WeightNorm:
    """Recomputes module.<name> = g * v / ||v|| (norm over every dim but `dim`) before each forward."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def compute(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        w: Tensor = v * (g / _norm_except_dim(v, self.dim))
        return w

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """torch.nn.utils.weight_norm (the hook form): `name` becomes name_g (magnitude) and name_v
    (direction) parameters, registered in that order after the module's other parameters."""
    if any(isinstance(h, _WeightNorm) and h.name == name for h in module._forward_pre_hooks.values()):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = getattr(module, name)
    if not isinstance(weight, Parameter):
        raise TypeError(f"weight_norm: module.{name} is not a Parameter")
    d = -1 if dim is None else (dim + weight.dim() if dim < -1 else dim)
    fn = _WeightNorm(name, d)
    delattr(module, name)
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight.detach(), d).detach().clone()))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    object.__setattr__(module, name, fn.compute(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Folds name_g and name_v back into one `name` parameter and removes the hook."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            weight = hook.compute(module).detach().clone()
            del module._forward_pre_hooks[key]
            delattr(module, name + "_g")
            delattr(module, name + "_v")
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


class _RequiredParameter:
    """The marker torch's optimizers use for an argument with no default (torch.optim.optimizer.required)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


class SDPBackend(enum.IntEnum):
    """torch.nn.attention.SDPBackend's names. rumus has one attention implementation per device, so the
    choice below is accepted and does not change which kernel runs."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends: Any, set_priority: bool = False) -> Iterator[None]:
    """torch.nn.attention.sdpa_kernel: a scope that asks for attention backends (see SDPBackend)."""
    chosen = list(backends) if isinstance(backends, (list, tuple)) else [backends]
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {b!r}")
    yield


def get_device_states(*args: Any) -> tuple[list[int], list[Any]]:
    """torch.utils.checkpoint.get_device_states: the accelerator RNG states of the devices the tensor
    arguments live on. rumus's generators are per process, not per accelerator: none to save."""
    return [], []


def set_device_states(devices: list[int], states: list[Any], *, device_type: Any = None) -> None:
    if devices or states:
        raise ValueError("set_device_states: rumus keeps no per-device RNG states; pass what "
                         "get_device_states returned")


def scalar_tensor(s: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """torch.scalar_tensor: a 0-d tensor of `s`, float32 unless dtype says otherwise."""
    from rumus_contracts import float32

    out = _creation.full((), float(s), dtype=dtype if dtype is not None else float32, device=device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _assert(condition: Any, message: str) -> None:
    """torch._assert: a symbolically traceable assert."""
    if isinstance(condition, Tensor):
        condition = bool(condition.item())
    assert condition, message


def _marker(fn: Any = None, **kwargs: Any) -> Any:
    """@ignore, @ignore(drop=True), @unused, @export: TorchScript markers, the function unchanged."""
    if fn is None:
        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            return f
        return wrap
    return fn


def _false() -> bool:
    return False


def _jit_module() -> types.ModuleType:
    jit = _new_module("rumus.jit", "torch.jit's eager-mode markers (see rumus._torch_corpus_additions).")
    for name in ("ignore", "unused", "export"):
        setattr(jit, name, _marker)
    jit.is_scripting = _false  # type: ignore[attr-defined]
    jit.is_tracing = _false  # type: ignore[attr-defined]
    jit.Final = typing.Final  # type: ignore[attr-defined]
    jit._overload_method = _marker  # type: ignore[attr-defined]
    jit._script_if_tracing = _marker  # type: ignore[attr-defined]
    return jit


_DISTRIBUTION_MODULES = {
    "normal": ["Normal"], "categorical": ["Categorical"], "uniform": ["Uniform"], "bernoulli": ["Bernoulli"],
    "beta": ["Beta"], "laplace": ["Laplace"], "exponential": ["Exponential"],
    "one_hot_categorical": ["OneHotCategorical"], "multivariate_normal": ["MultivariateNormal"],
    "independent": ["Independent"], "kl": ["kl_divergence", "register_kl"], "distribution": ["Distribution"],
}


def _new_module(name: str, doc: str) -> types.ModuleType:
    # A spec, so importlib.util.find_spec (and the corpus's import renaming) can name it like a file module.
    mod = types.ModuleType(name, doc)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = mod
    return mod


def _fx_wrap(fn_or_name: Any) -> Any:
    """torch.fx.wrap: marks a function as a leaf for symbolic tracing; eager code is unchanged."""
    return fn_or_name


def _install_modules(namespace: dict[str, Any]) -> None:
    dists = importlib.import_module("rumus.distributions")
    for sub, names in _DISTRIBUTION_MODULES.items():
        full = f"rumus.distributions.{sub}"
        if full in sys.modules or hasattr(dists, sub):
            continue
        mod = _new_module(full, f"torch.distributions.{sub}'s path to rumus.distributions' names.")
        for n in names:
            setattr(mod, n, getattr(dists, n))
        setattr(dists, sub, mod)
    if "fx" not in namespace:
        fx = _new_module("rumus.fx", "torch.fx's eager-mode marker wrap() only; no symbolic tracing.")
        fx.wrap = _fx_wrap  # type: ignore[attr-defined]
        namespace["fx"] = fx


def install(namespace: dict[str, Any]) -> None:
    _install_modules(namespace)
    namespace.setdefault("normal", normal)
    namespace.setdefault("pi", math.pi)
    namespace.setdefault("scalar_tensor", scalar_tensor)
    namespace.setdefault("_assert", _assert)
    if "jit" not in namespace:
        namespace["jit"] = _jit_module()
    # rumus.utils.checkpoint is also the name of the checkpoint function; the module is what torch names.
    _checkpoint = importlib.import_module("rumus.utils.checkpoint")
    for mod, names in ((_nn_utils, {"weight_norm": weight_norm, "remove_weight_norm": remove_weight_norm}),
                       (_optimizer, {"required": required}),
                       (_attention, {"SDPBackend": SDPBackend, "sdpa_kernel": sdpa_kernel}),
                       (_checkpoint, {"get_device_states": get_device_states,
                                      "set_device_states": set_device_states})):
        for key, value in names.items():
            if not hasattr(mod, key):
                setattr(mod, key, value)

"""The small names torch programs touch in passing: torch.Size, torch.Tensor(*sizes), Tensor.type() with a
legacy class or no argument, the RNG state as a tensor, determinism / matmul-precision switches,
torch.jit's decorators and autograd.Variable. Each behaves as torch's where RUMUS has the concept and is
an accepted no-op, documented as such, where it has none."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from rumus_contracts import DType, RumusError, parse_dtype


from . import _creation
from ._torch_dtype_info import LEGACY_NAMES
from .tensor import Tensor

F = TypeVar("F", bound=Callable[..., Any])


class Size(tuple):  # type: ignore[type-arg]
    """torch.Size: a tuple of ints (tensor shapes are plain tuples here; they compare equal to a Size)."""

    def __new__(cls, sizes: Any = ()) -> Size:
        return super().__new__(cls, (int(s) for s in sizes))

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"


_FROM_LEGACY = {v: k for k, v in LEGACY_NAMES.items()}


def tensor_type(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """Tensor.type(): the legacy name ('torch.FloatTensor') with no argument; else a cast to a dtype, a
    legacy class (torch.LongTensor) or its name."""
    if dtype is None:
        return f"torch.{LEGACY_NAMES.get(self.dtype.name, self.dtype.name)}"
    name = getattr(dtype, "__name__", None) if callable(dtype) and not isinstance(dtype, DType) else None
    if isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1]
    if name in _FROM_LEGACY:
        return self.to(dtype=parse_dtype(_FROM_LEGACY[name]))
    return self.to(dtype=dtype)


def _tensor_init(self: Tensor, *args: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> None:
    """torch.Tensor(data) or torch.Tensor(*sizes) (float32; sizes give zeros, torch leaves them unset)."""
    from ._tensor_base import _init
    if len(args) == 1 and not isinstance(args[0], int):
        src = _creation.tensor(args[0], dtype=dtype or ("float32" if not isinstance(args[0], Tensor) else None),
                               device=device, requires_grad=requires_grad)
    elif not args:
        src = _creation.zeros(0, dtype=dtype or "float32", device=device)
    elif all(isinstance(a, int) for a in args):
        src = _creation.zeros(*args, dtype=dtype or "float32", device=device)
    elif len(args) == 1 and isinstance(args[0], (tuple, list)) and not args[0]:
        src = _creation.zeros(0, dtype=dtype or "float32", device=device)
    else:
        raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got {args!r}")
    _init(self, src._storage, src.shape, src._strides, src._offset)
    self.requires_grad = requires_grad


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor (set_rng_state takes it back)."""
    from .random import default_generator
    blob = json.dumps(default_generator.get_state()).encode()
    return _creation.tensor(np.frombuffer(blob, np.uint8).copy(), dtype="uint8")


def set_rng_state(new_state: Tensor) -> None:
    from .random import default_generator
    try:
        state = json.loads(bytes(new_state.numpy().astype(np.uint8).tobytes()).decode())
    except (ValueError, UnicodeDecodeError):
        raise RumusError("set_rng_state: not a state that rumus.get_rng_state() returned") from None
    default_generator.set_state(state)


_switches: dict[str, Any] = {"deterministic": False, "matmul_precision": "highest"}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted and recorded: RUMUS's kernels are deterministic already (same bits at every thread count)."""
    _switches["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return bool(_switches["deterministic"])


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted ('highest' / 'high' / 'medium') and recorded: float32 matmuls are always full float32."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: invalid precision {precision!r}")
    _switches["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return str(_switches["matmul_precision"])


class _Jit:
    """torch.jit's decorators as the identity: the function or module runs eagerly, unchanged (RUMUS's
    compiler is rumus.compile); save/load of TorchScript archives are refused."""

    @staticmethod
    def script(obj: F, *args: Any, **kwargs: Any) -> F:
        return obj

    @staticmethod
    def trace(func: F, example_inputs: Any = None, *args: Any, **kwargs: Any) -> F:
        return func

    @staticmethod
    def ignore(fn: Any = None, **kwargs: Any) -> Any:
        return fn if fn is not None else (lambda f: f)

    unused = export = ignore

    @staticmethod
    def is_scripting() -> bool:
        return False

    @staticmethod
    def is_tracing() -> bool:
        return False

    @staticmethod
    def save(*args: Any, **kwargs: Any) -> None:
        raise RumusError("torch.jit.save: TorchScript archives are not supported; save a state_dict() with "
                         "rumus.save, or export ONNX with rumus.onnx.export")

    load = save

    Final = Any
    ScriptModule = object


jit = _Jit()

FUNCTIONS: dict[str, Any] = {
    "Size": Size, "get_rng_state": get_rng_state, "set_rng_state": set_rng_state,
    "use_deterministic_algorithms": use_deterministic_algorithms,
    "are_deterministic_algorithms_enabled": are_deterministic_algorithms_enabled,
    "set_float32_matmul_precision": set_float32_matmul_precision,
    "get_float32_matmul_precision": get_float32_matmul_precision,
}

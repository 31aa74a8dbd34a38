"""`rumus.autocast(device_type, dtype=...)`: a context manager and decorator that runs each op in the
precision its schema's autocast class asks for (rumus/amp/policy.py), like `torch.autocast`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from rumus_contracts import DType, DTypeError, RumusError, bfloat16, float16, parse_dtype

from .._thread_state import AutocastSaved, autocast_state

F = TypeVar("F", bound=Callable[..., Any])

# torch's device names; "cuda" and "mps" are the GPU here, which is the wgpu backend
_DEVICE_ALIASES = {"cuda": "wgpu", "mps": "wgpu", "gpu": "wgpu"}
_DEFAULT_DTYPE = {"cpu": bfloat16, "wgpu": float16}  # PyTorch's defaults: bfloat16 on CPU, float16 on GPU


class autocast:  # noqa: N801  (torch's name)
    """Mixed precision for the ops run inside: GEMMs, convolutions and attention in `dtype`, reductions,
    norms and losses in float32, mixed inputs promoted (each op's schema says which).

    device_type -- the backend whose tensors are cast ("cpu", "wgpu"; torch's "cuda" means "wgpu");
    dtype       -- float16 or bfloat16 (default: bfloat16 on cpu, float16 on wgpu);
    enabled     -- False turns autocast off inside an enclosing block;
    cache_enabled -- cast each parameter once per outermost block (PyTorch's weight-cast cache).
    The state is per thread. Run backward outside the block (autograd ignores autocast anyway:
    gradients come back in each tensor's own dtype)."""

    def __init__(self, device_type: str, dtype: DType | str | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise RumusError(f"autocast: device_type must be a string such as 'cpu' or 'wgpu', got "
                             f"{type(device_type).__name__}")
        name = device_type.split(":")[0]
        self.device_type = _DEVICE_ALIASES.get(name, name)
        if dtype is None:
            dtype = _DEFAULT_DTYPE.get(self.device_type, float16)
        self.fast_dtype = parse_dtype(dtype)
        if self.fast_dtype not in (float16, bfloat16):
            raise DTypeError(f"autocast: dtype must be rumus.float16 or rumus.bfloat16, got {self.fast_dtype}; "
                             f"for float32 everywhere, leave autocast off (enabled=False)")
        self.enabled = bool(enabled)
        self.cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._prev: list[AutocastSaved] = []

    def __enter__(self) -> autocast:
        if self.enabled:
            self._prev.append(autocast_state.push(True, self.fast_dtype.name, self.device_type, self.cache_enabled))
        else:
            self._prev.append(autocast_state.push(False, None))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        autocast_state.restore(self._prev.pop())

    def __call__(self, fn: F) -> F:
        """As a decorator: every call of `fn` runs inside a fresh block with these settings."""
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on in this thread (for `device_type`, when given)."""
    st = autocast_state
    if not st.enabled or device_type is None:
        return st.enabled
    name = _DEVICE_ALIASES.get(device_type, device_type)
    return st.device_type is None or st.device_type == name


def get_autocast_dtype(device_type: str | None = None) -> DType | None:
    """The dtype autocast lowers to in this thread, or None when it is off."""
    return parse_dtype(autocast_state.dtype) if is_autocast_enabled(device_type) else None

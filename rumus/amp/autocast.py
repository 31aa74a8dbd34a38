"""`rumus.autocast(device_type, dtype=...)`: a context manager and decorator that runs each op in the
precision its schema's autocast class asks for (rumus/amp/policy.py), like `torch.autocast`."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from rumus_contracts import BackendUnavailable, DType, DTypeError, RumusError, bfloat16, float16, parse_dtype

from .._thread_state import AutocastSaved, autocast_state

F = TypeVar("F", bound=Callable[..., Any])

# torch's device names; "cuda" and "mps" are the GPU here, which is the wgpu backend
_DEVICE_ALIASES = {"cuda": "wgpu", "mps": "wgpu", "gpu": "wgpu"}
_DEFAULT_DTYPE = {"cpu": bfloat16, "wgpu": float16}  # PyTorch's defaults: bfloat16 on CPU, float16 on GPU
# the device types torch.autocast accepts; one RUMUS has no backend for disables autocast with a warning
# (torch's answer to an unavailable device), any other name is an error (torch raises RuntimeError)
_TORCH_DEVICE_TYPES = frozenset({"cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
                                 "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                                 "privateuseone"})


def _usable(requested: str, backend: str) -> bool:
    """Whether `backend` can run here; warns as torch does (and autocast is then disabled) when not."""
    from .. import _runtime  # late binding: the plugin registry loads on first use
    backends = _runtime.plugins().backends
    names = backends.names()
    said = f"'{requested}'" + (f" (the {backend} backend here)" if requested != backend else "")
    if backend in names:
        status = backends.status(backend)
        if status == "ok":
            return True
        warnings.warn(f"User provided device_type of {said}, but the {backend} backend is not available "
                      f"({status}). Disabling autocast.", UserWarning, stacklevel=3)
        return False
    if requested not in _TORCH_DEVICE_TYPES:
        raise BackendUnavailable(f"autocast: unknown device_type {requested!r}; expected a RUMUS backend "
                                 f"({', '.join(names)}) or one of torch's device types")
    warnings.warn(f"User provided device_type of {said}, but RUMUS has no such backend (installed: "
                  f"{', '.join(names)}). Disabling autocast.", UserWarning, stacklevel=3)
    return False


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
        self.enabled = bool(enabled) and _usable(name, self.device_type)
        self.cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._prev: list[AutocastSaved] = []
        self._counts: list[tuple[int, int]] = []

    def __enter__(self) -> autocast:
        st = autocast_state
        self._counts.append((st.ops_on_device, st.ops_elsewhere))
        st.ops_on_device = st.ops_elsewhere = 0
        if self.enabled:
            self._prev.append(st.push(True, self.fast_dtype.name, self.device_type, self.cache_enabled))
        else:
            self._prev.append(st.push(False, None))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        st = autocast_state
        st.restore(self._prev.pop())
        on, elsewhere = st.ops_on_device, st.ops_elsewhere
        before_on, before_elsewhere = self._counts.pop()
        st.ops_on_device, st.ops_elsewhere = before_on + on, before_elsewhere + elsewhere  # an outer block's too
        if self.enabled and exc_type is None and elsewhere and not on:
            warnings.warn(f"autocast('{self.device_type}') cast nothing: none of the {elsewhere} ops it covered "
                          f"had a tensor on {self.device_type}. Use rm.autocast('<the tensors' device>', ...) "
                          f"for tensors on another device.", UserWarning, stacklevel=2)

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

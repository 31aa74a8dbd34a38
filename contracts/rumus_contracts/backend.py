"""The Backend port: a buffer allocator plus kernels. It knows nothing of autograd or modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .device import Device
from .dtype import DType
from .errors import PluginError
from .tensor_arg import TensorArg

# A kernel writes into preallocated outputs: kernel(outputs, inputs, attrs) -> None.
# Inputs keep their strides (kernels must honour them) unless the op schema asks for contiguity.
Kernel = Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]], None]


@dataclass
class Capabilities:
    """What a backend offers on one device; `rumus info` and the conformance matrix print it."""

    dtypes: tuple[DType, ...]
    features: tuple[str, ...] = ()
    limits: Mapping[str, int] = field(default_factory=dict)
    description: str = ""


@runtime_checkable
class Backend(Protocol):
    """What the core relies on. Buffers are opaque to the core; only the backend reads them."""

    name: str

    def devices(self) -> list[Device]:
        """Devices this backend drives, index 0 first (the default)."""
        ...

    def allocate(self, device: Device, numel: int, dtype: DType) -> Any:
        """An uninitialised contiguous buffer of `numel` storage elements of `dtype.numpy`."""
        ...

    def from_numpy(self, device: Device, array: np.ndarray[Any, Any], dtype: DType) -> Any:
        """A new buffer holding a copy of the C-contiguous storage array `array`."""
        ...

    def to_numpy(self, arg: TensorArg) -> np.ndarray[Any, Any]:
        """The logical contents of `arg` as a new host array (the only host sync point)."""
        ...

    def copy_(self, dst: TensorArg, src: TensorArg) -> None:
        """Strided copy with dtype conversion between two tensors of this backend."""
        ...

    def synchronize(self, device: Device) -> None:
        """Wait until everything recorded for `device` has run."""
        ...

    def capabilities(self, device: Device) -> Capabilities:
        ...

    def adapt_kernel(self, kernel: Kernel) -> Kernel:
        """The callable the dispatcher will run for a kernel registered for this backend.

        Called once per (op, dtype) the first time the core looks the kernel up; the result is cached.
        Default behaviour (what a backend whose kernels are Python callables writes):
        ``return kernel`` for a callable, and raise :class:`PluginError` for a :class:`ShaderKernel`,
        which such a backend cannot run. A GPU backend compiles a `ShaderKernel` here (WGSL for
        `rumus_wgpu`) and returns a callable that dispatches it. Must not run the kernel.
        """
        ...


class ShaderKernel:
    """A kernel given as shader source (for a GPU backend to compile), not as a Python function.

    language    -- "wgsl".
    source      -- the shader text; bindings: group 0, outputs first then inputs, then one uniform
                   buffer of u32/f32 words produced by `params`. Each storage binding is the tensor's
                   WHOLE buffer: offsets and strides (in elements) reach the shader only through
                   `params`, and the shader applies them. On the WebGPU backend bool is stored as one
                   u32 per element and int64 as vec2<u32>. The uniform buffer's size is fixed by the
                   first call.
    entry_point -- the compute entry point.
    workgroups  -- (outputs, inputs, attrs) -> (x, y, z) dispatch size.
    params      -- (outputs, inputs, attrs) -> list of numbers packed as the uniform buffer
                   (ints as u32/i32, floats as f32), or None for no uniform buffer.
    """

    def __init__(self, language: str, source: str, entry_point: str,
                 workgroups: Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]],
                                      tuple[int, int, int]],
                 params: Callable[[Sequence[TensorArg], Sequence[TensorArg], Mapping[str, Any]],
                                  Sequence[int | float]] | None = None) -> None:
        self.language, self.source, self.entry_point = language, source, entry_point
        self.workgroups, self.params = workgroups, params

    def __call__(self, outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                 attrs: Mapping[str, Any]) -> None:
        raise TypeError("a ShaderKernel is compiled by its backend, never called directly")


def callable_kernel(backend: str, kernel: Kernel) -> Kernel:
    """`Backend.adapt_kernel`'s default for a backend that runs Python callables and compiles no shaders."""
    if isinstance(kernel, ShaderKernel):
        raise PluginError(f"backend '{backend}' runs Python callables and cannot compile a {kernel.language} "
                          f"ShaderKernel; register a callable kernel(outputs, inputs, attrs) for it")
    return kernel


@dataclass(frozen=True)
class FusedProgram:
    """A chain of elementwise table ops (rumus_contracts.ops.expressions) that `rm.compile` asks a
    backend to run as ONE kernel, through the optional backend method
    ``compile_fused(program: FusedProgram) -> Kernel`` (absent: no fusion on that backend).

    Every operand of the kernel has the output's shape (broadcast inputs arrive expanded, stride 0), so
    the kernel computes step after step per element, keeping intermediates in registers.
    steps   -- (op, operands, params): an operand `r` is input `r` when r < n_inputs, else the value of
               step `r - n_inputs`; params are the op's Expr.params values in the table's order.
    outputs -- the steps whose values are written out, in the kernel's output order.
    The kernel is called as kernel(outputs, inputs, {}) over TensorArgs; a backend that cannot express
    an op for `dtype` raises rumus_contracts.ops.expr_lang.Unsupported and the chain stays unfused.
    """

    dtype: DType
    n_inputs: int
    steps: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class FusedRowProgram:
    """An elementwise chain feeding a row op of the row-op table (rumus_contracts.ops.row_ops) along
    the last dim, that `rm.compile` asks a backend to run as ONE kernel, through the optional backend
    method ``compile_fused_row(program: FusedRowProgram) -> Kernel`` (absent: no such fusion there).

    The row op's input x is the chain's last step: its element expression is the chain's, so x is never
    stored unless `chain.outputs` names it (a later kernel reads it: a norm's backward reads its input).
    chain   -- the elementwise part (a FusedProgram over the row op's input shape); its outputs are the
               steps written out as well.
    op      -- the row op (ROW_OPS key); params: its RowOp.params values, in the table's order.
    The kernel is called as kernel([row output, *chain outputs], [*chain inputs, *column operands], {});
    every chain operand has x's shape (broadcasts expanded, stride 0), columns are contiguous rows of the
    last dim's length. A backend that cannot express it raises Unsupported and both stay unfused.
    """

    chain: FusedProgram
    op: str
    params: tuple[float, ...]

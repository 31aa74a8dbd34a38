"""CpuBackend: host memory as flat numpy arrays; kernels in C (cffi) and GEMM through numpy's BLAS."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rumus_contracts import (
    BackendUnavailable, Capabilities, Device, DType, Kernel, TensorArg, bfloat16, bool_, float16, float32, float64,
    int8, int16, int32, int64, uint8,
)
from rumus_contracts.backend import callable_kernel

CPU = Device("cpu", 0)
DTYPES: tuple[DType, ...] = (float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool_)


class CpuBackend:
    """The "cpu" backend. A buffer is a 1-D C-contiguous numpy array of `dtype.numpy` elements."""

    name = "cpu"

    def __init__(self, num_threads: int | None = None) -> None:
        try:
            from ._lib import lib  # loads the compiled kernels
            from .plugin import kernel_table
            from .threads import configure_process, set_num_threads
        except ImportError as exc:
            raise BackendUnavailable(
                f"the CPU kernels are not compiled ({exc}); run `python csrc/build_cpu_kernels.py` in a "
                f"source checkout, or reinstall with `pip install -e .`") from None
        configure_process(lib)  # the process-wide settings (malloc, OpenBLAS, libgomp): now, not at import
        if num_threads is not None:  # otherwise RUMUS_NUM_THREADS (or every core), set when the kernels load
            set_num_threads(num_threads)
        self.kernels: Mapping[str, Kernel] = kernel_table()
        self._copy = self.kernels["copy"]

    def devices(self) -> list[Device]:
        return [CPU]

    def allocate(self, device: Device, numel: int, dtype: DType) -> np.ndarray:
        return np.empty(numel, dtype.numpy)

    def from_numpy(self, device: Device, array: np.ndarray, dtype: DType) -> np.ndarray:
        return np.array(array, dtype=dtype.numpy, order="C", copy=True).reshape(-1)

    def to_numpy(self, arg: TensorArg) -> np.ndarray:
        buf = arg.buffer
        if 0 in arg.shape:
            return np.empty(arg.shape, buf.dtype)
        isz = buf.itemsize
        view = np.ndarray(arg.shape, buf.dtype, buf, arg.offset * isz, tuple(s * isz for s in arg.strides))
        return np.array(view, order="C", copy=True)

    def copy_(self, dst: TensorArg, src: TensorArg) -> None:
        self._copy([dst], [src], {"dtype": dst.dtype})

    def synchronize(self, device: Device) -> None:
        return None

    def capabilities(self, device: Device) -> Capabilities:
        from .kernels_quant import isa_feature
        from .threads import describe, policy
        p = policy()
        threads = p["kernel_threads"]
        blas = p["blas_threads"]
        return Capabilities(
            dtypes=DTYPES,
            features=("thread_pool",) + (("blas_on_kernel_threads",) if p["blas_on_kernel_threads"] else ())
            + (isa_feature(),),
            limits={"max_dims": 64, "num_threads": threads, "parallel_grain": p["grain"],
                    **({"blas_threads": blas} if isinstance(blas, int) else {})},
            description=("host CPU: C kernels via cffi, GEMM via numpy's BLAS and RUMUS's own float32 kernel; "
                         f"threads: {describe()}"))

    def adapt_kernel(self, kernel: Kernel) -> Kernel:
        return callable_kernel(self.name, kernel)  # the Backend protocol's default: callables run as they are

    def compile_fused(self, program: Any) -> Kernel:
        """rm.compile's optional fusion port (rumus_contracts.backend.FusedProgram): C built at run time."""
        from .fused import compile_fused
        return compile_fused(program)

    def compile_fused_row(self, program: Any) -> Kernel:
        """rm.compile's optional port for a chain fused into a row op (rumus_contracts.backend.FusedRowProgram)."""
        from .fused_rows import compile_fused_row
        return compile_fused_row(program)

    def __repr__(self) -> str:
        return "CpuBackend()"


def create() -> Any:
    """The factory the plugin registers (a function, so importing the plugin builds nothing)."""
    return CpuBackend()

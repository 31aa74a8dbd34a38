"""The backend kit: what every backend over host (numpy) memory would otherwise write again.

A backend whose buffers are 1-D numpy arrays (``Backend.allocate`` returns ``np.empty(numel, dtype.numpy)``)
gets from here:

- :func:`strided_view` -- the numpy view of a :class:`~rumus_contracts.TensorArg` (shape, strides and
  offset applied, no copy, writable; size-0 tensors included), and :func:`host_copy`, the
  C-contiguous copy that ``Backend.to_numpy`` returns;
- :func:`convert` -- RUMUS's cast rule (floats to ints truncate and saturate, NaN to 0; to bool is
  ``x != 0``), what ``Backend.copy_`` and the ``copy`` kernel need;
- :func:`table_kernel` / :func:`table_kernels` -- a reference kernel for every op of the elementwise
  expression table (rumus_contracts.ops.expressions: forward ops and their fused backward ops),
  evaluated by numpy, so a backend gets all elementwise primitives without writing one;
- :func:`numpy_evaluator` -- the table's numpy renderer itself (fn(*arrays, **params) -> array), for a
  backend that wants to build its own kernels from the table.

Only numpy and ``rumus_contracts`` are used: a third-party backend needs nothing of the core.
``examples/backend-numpy`` is a complete backend built on this kit.
"""

from .casts import convert
from .table import compute_dtype, numpy_evaluator, table_dtypes, table_kernel, table_kernels
from .views import host_copy, strided_view

__all__ = [
    "compute_dtype", "convert", "host_copy", "numpy_evaluator", "strided_view", "table_dtypes", "table_kernel",
    "table_kernels",
]

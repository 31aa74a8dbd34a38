"""Adversarial cases of the backend kit and the reference backend (examples/backend-numpy): views at the
edges of their buffers, overlapping copies, indices outside their dim, and the cast rule's edge values.
The backend's kernels are called directly over TensorArgs, so no plugin needs installing."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from adversarial_cases import Case, _refuses
from rumus_contracts import IndexOutOfRange, TensorArg, float32, float64, int8, int64
from rumus_contracts.kit import convert, strided_view

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "backend-numpy")


def _numpy_backend() -> Any:
    if SOURCE not in sys.path:
        sys.path.insert(0, SOURCE)
    import rumus_numpy.backend
    import rumus_numpy.kernels
    return rumus_numpy.backend.NumpyBackend(), rumus_numpy.kernels.KERNELS


def _arg(buf: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0,
         dtype: Any = float64) -> TensorArg:
    return TensorArg(buf, shape, strides, offset, dtype)


def _same(name: str, got: Any, want: Any) -> Case:
    ok = np.array_equal(np.asarray(got), np.asarray(want))
    return Case(name, None if ok else f"wrong: got {np.asarray(got).tolist()}, expected {np.asarray(want).tolist()}")


def kit_views_and_copies() -> Iterator[Case]:
    buf = np.arange(6, dtype=np.float64)
    for offset in (0, 5, 6, 9):  # an empty view anywhere, past the end included
        try:
            v = strided_view(_arg(buf, (0, 2), (2, 1), offset))
            yield Case(f"empty view at offset {offset}", None if v.shape == (0, 2) else f"wrong shape {v.shape}")
        except Exception as exc:  # noqa: BLE001  (any exception is the finding)
            yield Case(f"empty view at offset {offset}", f"raised {type(exc).__name__}: {exc}")
    backend, _ = _numpy_backend()
    for shift in (1, 2, 3):  # x[shift:] = x[:-shift] in one buffer: the copy must read before it writes
        b = np.arange(8, dtype=np.float64)
        n = 8 - shift
        backend.copy_(_arg(b, (n,), (1,), shift), _arg(b, (n,), (1,), 0))
        yield _same(f"overlapping copy_ forward by {shift}", b, [*range(shift), *range(n)])
        b = np.arange(8, dtype=np.float64)
        backend.copy_(_arg(b, (n,), (1,), 0), _arg(b, (n,), (1,), shift))
        yield _same(f"overlapping copy_ backward by {shift}", b, [*range(shift, 8), *range(n, 8)])
    b = np.array([np.nan, np.inf, -np.inf, -129.5, 127.9], np.float32)
    yield _same("float32 edges -> int8 (NaN 0, saturate, truncate)", convert(b, int8), [0, 127, -128, -128, 127])
    out = np.zeros(3, np.int64)
    backend.copy_(_arg(out, (3,), (1,), 0, int64), _arg(np.array([np.nan, 1e30, -2.5], np.float32), (3,), (1,), 0,
                                                          float32))
    yield _same("copy_ float32 -> int64 edges", out, [0, 2**63 - 1, -2])


def numpy_backend_bad_indices() -> Iterator[Case]:
    _, kernels = _numpy_backend()
    x = np.arange(12, dtype=np.float64)
    w = _arg(x, (4, 3), (3, 1))
    out = np.zeros(12)

    def call(op: str, inputs: list[TensorArg], shape: tuple[int, ...], attrs: dict[str, Any]) -> Callable[[], None]:
        o = _arg(out, shape, tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape))))
        return lambda: kernels[op]([o], inputs, attrs)

    for bad in (4, -1, 2**40):
        idx2 = _arg(np.array([0, bad, 1, 2], np.int64), (2, 2), (2, 1), 0, int64)
        yield _refuses(call("gather", [w, idx2], (2, 2), {"dim": 0}), IndexOutOfRange, f"gather [{bad}]")
        src = _arg(np.ones(4), (2, 2), (2, 1))
        yield _refuses(call("scatter_add", [w, idx2, src], (4, 3), {"dim": 0}), IndexOutOfRange,
                       f"scatter_add [{bad}]")
        idx3 = _arg(np.array([2, 0, bad, 1], np.int64), (2, 2), (1, 2), 0, int64)  # a transposed index
        yield _refuses(call("gather", [w, idx3], (2, 2), {"dim": 1}), IndexOutOfRange, f"gather dim 1 [{bad}]")


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "32 backend kit: empty views, overlapping copies, cast edges": kit_views_and_copies,
    "32 numpy backend: indices outside their dim": numpy_backend_bad_indices,
}

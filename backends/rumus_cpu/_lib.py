"""The compiled C kernels, plus the per-layout "meta" arrays the kernels take, cached.

A meta array describes the iteration space of one call in elements (shapes, strides), with size-1
dims dropped and adjacent dims merged where every operand allows it, so most calls reach C as a
single contiguous or strided run. Building one costs microseconds; a dict keyed by the layout
(shape and strides tuples) makes the per-call cost one lookup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from rumus_contracts import DType, ShapeError
from rumus_contracts.ops import expr_c

from . import threads

from ._kernels import ffi as ffi, lib as lib  # ImportError here means: not compiled

# csrc/ next to the package in a source checkout (editable install); absent in an installed wheel
CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "csrc")
REBUILD = "rebuild it with `pip install -e .` (or `python csrc/build_cpu_kernels.py`) in the source checkout"


class StaleExtension(ImportError):
    """The compiled kernels do not match the expression table or the C sources they run with."""


def check_build(table_hash: str | None = None, sources_hash: str | None = None) -> None:
    """Refuse an extension built from other sources: its embedded hashes must equal the table's (always
    checked) and, in a source checkout, those of csrc/ as it is now."""
    if not hasattr(lib, "rumus_expr_table_hash"):
        raise StaleExtension(f"rumus_cpu: the compiled kernels predate the expression table; {REBUILD}")
    built_table = ffi.string(lib.rumus_expr_table_hash()).decode()
    want_table = table_hash if table_hash is not None else expr_c.table_hash()
    if built_table != want_table:
        raise StaleExtension(f"rumus_cpu: the compiled kernels were built from another expression table "
                             f"(built {built_table[:12]}, tables now {want_table[:12]}); {REBUILD}")
    if sources_hash is None and os.path.isdir(CSRC):
        sources_hash = expr_c.sources_hash(CSRC)
    built_sources = ffi.string(lib.rumus_sources_hash()).decode()
    if sources_hash is not None and built_sources != sources_hash:
        raise StaleExtension(f"rumus_cpu: the compiled kernels are stale: csrc/ changed since they were built "
                             f"(built {built_sources[:12]}, sources now {sources_hash[:12]}); {REBUILD}")


check_build()

MAX_DIMS = 64
CACHE_LIMIT = 8192
EMPTY = 0  # cache value for layouts with no elements: the kernel returns before calling C

SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32",
          "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b"}

META: dict[tuple[Any, ...], Any] = {}  # layout key -> int64_t[] meta (or EMPTY)

_from_buffer = ffi.from_buffer


def ptr(arg: Any) -> Any:
    """A TensorArg's buffer as a C pointer (char *), kept on the argument (TensorArg.native): a tensor that is
    the input of many ops converts once. Callers write `arg.native or ptr(arg)`."""
    p = arg.native = _from_buffer(arg.buffer)
    return p

threads.configure(lib)  # the pool and its thread budget (RUMUS_NUM_THREADS or every core); nothing process-wide


def loops(find: Callable[[bytes], int], op: str, dtypes: Iterable[DType]) -> dict[str, int]:
    """{dtype name: loop index} for `op`, from one of the C tables; a missing loop is a build bug."""
    out = {}
    for dt in dtypes:
        idx = find(f"{op}_{SUFFIX[dt.name]}".encode())
        if idx < 0:
            raise RuntimeError(f"rumus_cpu: no C loop '{op}_{SUFFIX[dt.name]}'; rebuild the extension")
        out[dt.name] = idx
    return out


def _store(key: tuple[Any, ...], values: list[int] | None) -> Any:
    if len(META) >= CACHE_LIMIT:
        META.clear()
    meta = EMPTY if values is None else ffi.new("int64_t[]", values)
    META[key] = meta
    return meta


def _merge(dims: list[tuple[int, tuple[int, ...]]]) -> list[tuple[int, tuple[int, ...]]]:
    """Merge dim i into i+1 where every operand has stride[i] == stride[i+1] * size[i+1]."""
    merged: list[tuple[int, tuple[int, ...]]] = []
    for size, st in dims:
        if merged and all(p == s * size for p, s in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    if len(merged) > MAX_DIMS:
        raise ShapeError(f"rumus_cpu: at most {MAX_DIMS} non-mergeable dims are supported, got {len(merged)}")
    return merged


def ew_meta(key: tuple[Any, ...]) -> Any:
    """key = (shape, strides of operand 0, strides of operand 1, ...); all operands share `shape`."""
    shape, strides = key[0], key[1:]
    if 0 in shape:
        return _store(key, None)
    nops = len(strides)
    dims = _merge([(n, tuple(st[d] for st in strides)) for d, n in enumerate(shape) if n != 1])
    if not dims:
        dims = [(1, (0,) * nops)]
    values = [len(dims), *(n for n, _ in dims)]
    for k in range(nops):
        values.extend(st[k] for _, st in dims)
    return _store(key, values)


def reduce_meta(key: tuple[Any, ...]) -> Any:
    """key = ("r", x shape, x strides, out strides, reduced dims); see rumus_rlayout in C."""
    _, shape, xst, ost, dims = key
    kept: list[tuple[int, tuple[int, ...]]] = [(n, (ost[d], xst[d])) for d, n in enumerate(shape)
                                               if d not in dims and n != 1]
    if any(n == 0 for n, _ in kept):
        return _store(key, None)
    red: list[tuple[int, tuple[int, ...]]] = [(shape[d], (xst[d],)) for d in dims if shape[d] != 1]
    red.sort(key=lambda item: -abs(item[1][0]))  # smallest stride innermost: reads walk memory in order
    kept, red = _merge(kept), _merge(red)
    values = [len(kept), *(n for n, _ in kept), *(s[0] for _, s in kept), *(s[1] for _, s in kept),
              len(red), *(n for n, _ in red), *(s[0] for _, s in red)]
    return _store(key, values)


def softmax_meta(key: tuple[Any, ...]) -> Any:
    """key = ("s", x shape, x strides, out strides, dim): kept dims, then (n, out stride, in stride)."""
    _, shape, xst, ost, dim = key
    if 0 in shape:
        return _store(key, None)
    if not shape:
        return _store(key, [0, 1, 0, 0])
    kept = _merge([(n, (ost[d], xst[d])) for d, n in enumerate(shape) if d != dim and n != 1])
    values = [len(kept), *(n for n, _ in kept), *(s[0] for _, s in kept), *(s[1] for _, s in kept),
              shape[dim], ost[dim], xst[dim]]
    return _store(key, values)

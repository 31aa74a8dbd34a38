"""Values while interpreting an ONNX graph, and the host side of it.

Values are rumus Tensors, or numpy arrays for the small integer "shape arithmetic" that graphs compute
(Shape -> Gather -> Concat -> Reshape): HOST_OPS run those on the host when every input is host data.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .. import _creation
from ..tensor import Tensor

Value = Tensor | np.ndarray | None
Fn = Callable[[list[Any], dict[str, Any], int], Any]
_ONNX_TO_DTYPE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
                  11: "float64", 16: "bfloat16"}
_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
       11: np.float64}


# the attribute under which the interpreter tells an op how many outputs its node asks for
OUTPUTS = "__outputs__"

# the device the running OnnxModule lives on: constants made while interpreting go there
DEVICE: ContextVar[Any] = ContextVar("rumus_onnx_device", default=None)


def new(v: Any, dtype: Any = None) -> Tensor:
    return _creation.tensor(np.asarray(v), dtype=dtype, device=DEVICE.get())


def T(v: Value) -> Tensor:
    if isinstance(v, Tensor):
        return v
    if v is None:
        raise RumusError("a required input is missing")
    return new(v)


def H(v: Value) -> np.ndarray:
    """Host ints (shapes, axes): Tensors are read back."""
    return np.asarray(v.numpy() if isinstance(v, Tensor) else v)


def _ints(v: Value) -> list[int]:
    return [int(x) for x in H(v).reshape(-1)]


def _norm(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"axis {axis} is out of range for {ndim} dims")
    return axis % ndim if ndim else 0


def _axes(args: list[Any], attrs: dict[str, Any], ndim: int, pos: int = 1) -> list[int] | None:
    given = args[pos] if len(args) > pos and args[pos] is not None else attrs.get("axes")
    if given is None:
        return None
    return sorted({_norm(a, ndim) for a in _ints(given)})


# ---- shape arithmetic on the host --------------------------------------------------------------------

def _h_reshape(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    x, shape = H(a[0]), _ints(a[1])
    return x.reshape(_target(x.shape, shape, at))


def _target(in_shape: tuple[int, ...], shape: list[int], at: dict[str, Any]) -> tuple[int, ...]:
    if not at.get("allowzero", 0):
        shape = [in_shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1]))
        total = int(np.prod(in_shape))
        shape = [total // rest if s == -1 and rest else s for s in shape]
    return tuple(shape)


def _h_slice(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    x = H(a[0])
    starts, ends = _ints(a[1]), _ints(a[2])
    axes = _ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
    steps = _ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        index[_norm(ax, x.ndim)] = slice(s, e, st)
    return x[tuple(index)]


def _h_gather(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    return np.take(H(a[0]), H(a[1]).astype(np.int64), axis=int(at.get("axis", 0)))


def _h_concat(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    return np.concatenate([H(x) for x in a], axis=int(at["axis"]))


def _h_unsqueeze(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    x = H(a[0])
    axes = _ints(a[1]) if len(a) > 1 else list(at["axes"])
    nd = x.ndim + len(axes)
    return np.expand_dims(x, tuple(sorted(ax % nd for ax in axes)))


def _h_squeeze(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    x = H(a[0])
    axes = _axes(a, at, x.ndim)
    return np.squeeze(x, axis=None if axes is None else tuple(axes))


def _h_cast(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    return H(a[0]).astype(_NP[int(at["to"])])


def _binary(fn: Callable[..., Any]) -> Fn:
    return lambda a, at, o: fn(H(a[0]), H(a[1]))


def _h_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.trunc(x / y).astype(x.dtype) if x.dtype.kind in "iu" else x / y
    return out


HOST_OPS: dict[str, Fn] = {
    "Shape": lambda a, at, o: _shape(a, at),
    "Reshape": _h_reshape, "Slice": _h_slice, "Gather": _h_gather, "Concat": _h_concat,
    "Unsqueeze": _h_unsqueeze, "Squeeze": _h_squeeze, "Cast": _h_cast, "Identity": lambda a, at, o: a[0],
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply), "Div": _binary(_h_div),
    "Equal": _binary(np.equal), "Where": lambda a, at, o: np.where(H(a[0]), H(a[1]), H(a[2])),
    "Max": _binary(np.maximum), "Min": _binary(np.minimum),
    "Range": lambda a, at, o: _h_range(a),
    "ReduceProd": lambda a, at, o: np.prod(H(a[0]), keepdims=bool(at.get("keepdims", 1))).reshape(
        (1,) if at.get("keepdims", 1) else ()),
    "Expand": lambda a, at, o: _h_expand(a),
    "Constant": lambda a, at, o: _constant(at),
    "Mod": lambda a, at, o: (np.fmod if at.get("fmod", 0) else np.mod)(H(a[0]), H(a[1])),
}


def _h_range(a: list[Any]) -> np.ndarray:
    """ONNX Range on host scalars: its length is computed (and bounded) before numpy allocates it."""
    start, limit, delta = (H(v).item() for v in a[:3])
    if delta == 0:
        raise ShapeError("Range: delta must not be 0")
    count = max(float(np.ceil((limit - start) / delta)), 0.0)
    if not np.isfinite(count):
        raise ShapeError(f"Range({start}, {limit}, {delta}): the length is not finite")
    _creation.check_size("Range", (int(count),), H(a[0]).dtype.itemsize)
    return np.arange(start, limit, delta).astype(H(a[0]).dtype)


def _h_expand(a: list[Any]) -> np.ndarray:
    x = H(a[0])
    try:
        shape = np.broadcast_shapes(x.shape, tuple(_ints(a[1])))
    except ValueError:
        raise ShapeError(f"Expand: shape {x.shape} cannot broadcast to {tuple(_ints(a[1]))}") from None
    _creation.check_size("Expand", shape, x.dtype.itemsize)
    return np.asarray(x * np.ones(_ints(a[1]), dtype=x.dtype))


def _shape(a: list[Any], at: dict[str, Any]) -> np.ndarray:
    shape = a[0].shape
    nd = len(shape)
    start = int(at.get("start", 0))
    end = int(at.get("end", nd))
    start, end = max(0, start + nd if start < 0 else start), min(nd, end + nd if end < 0 else end)
    return np.asarray(shape[start:end], dtype=np.int64)


def _constant(at: dict[str, Any]) -> Value:
    if "value" in at:
        v = np.asarray(at["value"])
    elif "value_float" in at:
        v = np.asarray(at["value_float"], dtype=np.float32)
    elif "value_int" in at:
        v = np.asarray(at["value_int"], dtype=np.int64)
    elif "value_ints" in at:
        v = np.asarray(at["value_ints"], dtype=np.int64)
    elif "value_floats" in at:
        v = np.asarray(at["value_floats"], dtype=np.float32)
    else:
        raise RumusError(f"Constant with attributes {sorted(at)} is not supported")
    return new(v) if v.dtype.kind == "f" else v



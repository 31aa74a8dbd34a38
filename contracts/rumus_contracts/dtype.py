"""Element types, including the packed formats (q8 blocks, int4 groups, fixed-point i16)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True)
class DType:
    """An element type. `storage` is the numpy dtype the backend buffer holds.

    For plain dtypes storage == the logical dtype. Packed dtypes store words (q8, int4) or raw
    int16 (fixed_i16); their `param` is block size, group size or scale_log2.
    """

    name: str
    storage: str
    kind: str  # "f" float, "i" signed int, "u" unsigned int, "b" bool, "q" packed/quantized, "x" fixed
    param: int | None = None
    _np: np.dtype[np.generic] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_np", np.dtype(self.storage))
        object.__setattr__(self, "_hash", hash((self.name, self.storage, self.kind, self.param)))

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # rebuilt from its fields, so the hash is this process's: string hashes differ between processes, and
        # a dtype unpickled with its sender's cached hash would miss every registry lookup in the receiver
        return (DType, (self.name, self.storage, self.kind, self.param))

    # dtypes key every kernel-cache lookup: hash once, compare by identity first
    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, DType):
            return NotImplemented
        return (self.name, self.storage, self.kind, self.param) == (other.name, other.storage, other.kind,
                                                                    other.param)

    @property
    def itemsize(self) -> int:
        return int(self._np.itemsize)

    @property
    def numpy(self) -> np.dtype[np.generic]:
        """The numpy dtype of the storage."""
        return self._np

    @property
    def is_floating(self) -> bool:
        return self.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_packed(self) -> bool:
        return self.kind in ("q", "x")

    @property
    def is_fixed(self) -> bool:
        return self.kind == "x"

    def __repr__(self) -> str:
        return f"rumus.{self.name}"

    __str__ = __repr__


float32 = DType("float32", "float32", "f")
float64 = DType("float64", "float64", "f")
float16 = DType("float16", "float16", "f")
# numpy has no bfloat16: its storage is the upper half of a float32, kept as uint16.
bfloat16 = DType("bfloat16", "uint16", "f")
int64 = DType("int64", "int64", "i")
int32 = DType("int32", "int32", "i")
int16 = DType("int16", "int16", "i")
int8 = DType("int8", "int8", "i")
uint8 = DType("uint8", "uint8", "u")
bool_ = DType("bool", "bool", "b")

PLAIN_DTYPES: tuple[DType, ...] = (float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool_)
FLOAT_DTYPES: tuple[DType, ...] = (float32, float64, float16, bfloat16)
_BY_NAME = {d.name: d for d in PLAIN_DTYPES}


@cache
def q8(block_size: int) -> DType:
    """Symmetric int8 blocks with one f16 scale each (SPEC C), packed in u32 words."""
    if block_size <= 0 or block_size % 4:
        raise DTypeError(f"q8 block_size must be a positive multiple of 4, got {block_size}")
    return DType(f"q8({block_size})", "uint32", "q", block_size)


@cache
def int4(group_size: int) -> DType:
    """Asymmetric 4-bit weights in groups along K (SPEC D), eight nibbles per u32 word."""
    if group_size <= 0 or group_size % 8:
        raise DTypeError(f"int4 group_size must be a positive multiple of 8, got {group_size}")
    return DType(f"int4({group_size})", "uint32", "q", group_size)


@cache
def fixed_i16(scale_log2: int) -> DType:
    """Fixed-point: raw int16 q means q / 2**scale_log2 (SPEC E)."""
    if not isinstance(scale_log2, int) or not 0 <= scale_log2 <= 15:
        raise DTypeError(f"fixed_i16 scale_log2 must be an integer in 0..15, got {scale_log2!r}")
    return DType(f"fixed_i16({scale_log2})", "int16", "x", scale_log2)


_BY_NUMPY: dict[object, DType] = {np.dtype(d.storage): d for d in PLAIN_DTYPES if d.storage != "uint16"}


def from_numpy_dtype(dt: np.dtype[np.generic] | type) -> DType:
    """The RUMUS dtype matching a numpy dtype (float64 arrays stay float64)."""
    hit = _BY_NUMPY.get(dt)
    if hit is not None:
        return hit
    name = np.dtype(dt).name
    if name in _BY_NAME and name != "uint16":
        return _BY_NAME[name]
    raise DTypeError(f"numpy dtype {name} has no RUMUS equivalent; cast it to one of "
                     f"{', '.join(_BY_NAME)} first")


def parse_dtype(value: object) -> DType:
    """Accept a DType, a name ('float32', 'bool'), a numpy dtype or a Python type."""
    if isinstance(value, DType):
        return value
    if value is float:
        return float32
    if value is int:
        return int64
    if value is bool:
        return bool_
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        raise DTypeError(f"unknown dtype '{value}'; known: {', '.join(_BY_NAME)}")
    try:
        return from_numpy_dtype(np.dtype(value))  # type: ignore[call-overload]
    except TypeError as exc:
        raise DTypeError(f"cannot interpret {value!r} as a dtype") from exc


_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two tensors (PyTorch's category rules)."""
    if a == b:
        return a
    if a.is_packed or b.is_packed:
        raise DTypeError(f"cannot combine {a} and {b}: packed dtypes only take part in their own ops")
    ra, rb = _RANK[a.kind], _RANK[b.kind]
    if ra != rb:
        return a if ra > rb else b
    if a.kind == "f":
        order = [float16, bfloat16, float32, float64]
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if order.index(a) > order.index(b) else b
    return from_numpy_dtype(np.promote_types(a.numpy, b.numpy))

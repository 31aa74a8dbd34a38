"""The dtype groups the CPU kernels claim (the op schemas' groups, minus float16/bfloat16)."""

from __future__ import annotations

from rumus_contracts import DType, bool_, float32, float64, int8, int16, int32, int64, uint8

FLOAT: tuple[DType, ...] = (float32, float64)
SIGNED: tuple[DType, ...] = (*FLOAT, int64, int32, int8)
NUMERIC: tuple[DType, ...] = (*FLOAT, int64, int32, int8, uint8)
ALL: tuple[DType, ...] = (*NUMERIC, bool_)
# Every dtype the C code converts between (int16 is in no schema group yet, but copy/fill handle it).
STORAGE: tuple[DType, ...] = (*ALL, int16)

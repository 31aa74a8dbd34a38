"""The dtype groups the CPU kernels claim (the op schemas' groups).

float16 and bfloat16 are stored as 16-bit words and computed in float32 (csrc/internal/half.h). FLOAT is
the float32/float64 pair; a kernel file adds HALF where its C loops have the 16-bit columns.
"""

from __future__ import annotations

from rumus_contracts import DType, bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8

FLOAT: tuple[DType, ...] = (float32, float64)
HALF: tuple[DType, ...] = (float16, bfloat16)
SIGNED: tuple[DType, ...] = (*FLOAT, int64, int32, int8)
NUMERIC: tuple[DType, ...] = (*FLOAT, int64, int32, int8, uint8)
ALL: tuple[DType, ...] = (*NUMERIC, bool_)
# Every dtype the C code converts between (int16 is in no schema group yet, but copy/fill handle it).
STORAGE: tuple[DType, ...] = (*ALL, int16, *HALF)

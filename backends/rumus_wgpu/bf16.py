"""bfloat16 on the WebGPU backend: 16-bit words, two per u32, math in f32 (shaders/bf16.wgsl).

A kernel never writes a single bfloat16 element with a plain store: its neighbour shares the u32 word
and may belong to another invocation (or lie outside a strided view). Either an invocation owns whole
words (elementwise.py's pair plan: a contiguous, word-aligned, even-count output), or the output is bound
as atomic words and an element is written with an atomicAnd clearing its half and an atomicOr setting
it, so two invocations writing the two halves of one word never lose either write.
"""

from __future__ import annotations

import numpy as np

BF16 = "bfloat16"


def is_bf16(dtype: object) -> bool:
    return getattr(dtype, "name", None) == BF16


def input_accessor(name: str) -> str:
    """WGSL reading element i of a read-only bfloat16 binding `name` (array<u32>) as its 16 bits."""
    return (f"fn bf_{name}(i: u32) -> u32 {{\n"
            f"    return ({name}[i >> 1u] >> ((i & 1u) << 4u)) & 0xffffu;\n}}\n")


def output_accessors(name: str) -> str:
    """WGSL reading (atomicLoad) and writing (clear + set the half) element i of an atomic bfloat16
    output binding `name` (array<atomic<u32>>)."""
    return (f"fn bf_{name}(i: u32) -> u32 {{\n"
            f"    return (atomicLoad(&{name}[i >> 1u]) >> ((i & 1u) << 4u)) & 0xffffu;\n}}\n"
            f"fn bf_put_{name}(i: u32, h: u32) {{\n"
            f"    let shift = (i & 1u) << 4u;\n"
            f"    atomicAnd(&{name}[i >> 1u], ~(0xffffu << shift));\n"
            f"    atomicOr(&{name}[i >> 1u], (h & 0xffffu) << shift);\n}}\n")


def bits_of(value: float) -> int:
    """The bfloat16 bits of a Python float rounded once, as the CPU backend's rumus_f64_to_bf: double ->
    float32 rounding to odd (an inexact result gets an odd last bit), then to nearest even; NaN stays NaN."""
    with np.errstate(over="ignore"):
        f = np.float32(value)
    back = float(f)
    x = int(f.view(np.uint32))
    if back != value and value == value and not x & 1:
        x = x - 1 if (back > value) == (value > 0) else x + 1
    if (x & 0x7FFFFFFF) > 0x7F800000:
        return (x >> 16) | 0x40
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF

"""FlashAttention forward and backward (shaders/flash_attention.wgsl): tiled online softmax, one workgroup per
(batch * head, block of 64 query rows), K/V tiles in workgroup memory, O(L) extra memory.

The backward is FlashAttention-2's, in four dispatches: a row pass (lse and D = dout . out per query row
into one scratch buffer), a dK and a dV pass over key blocks (one kernel compiled twice: each keeps only
its own accumulator in registers) and a dQ pass over query blocks; each binds at most 8 storage buffers,
WebGPU's default limit. q, k, v and dout
may be strided; bias and key_bias come contiguous and broadcast through zero strides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rumus_contracts import RumusError, TensorArg
from rumus_contracts.ops.attention import default_scale

from .layout import device_of, new_buffer
from .nn_common import dispatch, pack, source, split_sections
from .nn_dropout import MASK32, mix32, threshold

WG = 64  # rows per workgroup (the shader's WG)
TILE = 2048  # floats per workgroup tile (the shader's arrays): BK = TILE / DMAX rows


def head_bucket(d: int) -> int:
    return 32 if d <= 32 else 64 if d <= 64 else 128


# the arrays whose rows each kernel reads, with the Config field of their strides: one copy of the
# shader's `rd` section per array (a reader names the kernel's binding, so each kernel gets its own)
READERS = {"forward": ("q", "k", "v"), "dkdv": ("q", "k", "v", "dout"), "dq": ("q", "k", "v", "dout")}
STRIDES = {"q": "qs", "k": "ks", "v": "vs", "dout": "os"}
KV_TILE = {"forward": "+kv_tile", "dq": "+kv_tile"}  # the kernels that stream K and V tiles past query rows
INCLUDE = ("dropout_hash",)  # the dropout mask's hash, shared with the dropout op


UNROLL = "for (var c = 0u; c < V4; c++) {"


def unroll_rows(src: str, v4: int) -> str:
    """Every `for (var c = 0u; c < V4; c++) { ... }` loop written out v4 times with c a constant: arrays
    indexed only by constants stay in registers, where a loop index (if the driver does not unroll) would
    put them in slow local memory."""
    out: list[str] = []
    lines = src.split("\n")
    n = 0
    while n < len(lines):
        line = lines[n]
        if line.strip() != UNROLL:
            out.append(line)
            n += 1
            continue
        indent = line[:len(line) - len(line.lstrip())]
        end = lines.index(indent + "}", n + 1)
        body = lines[n + 1:end]
        for c in range(v4):  # each copy in a block of its own: the body's `let`s are declared once per copy
            out.append(indent + "{")
            out.extend(re.sub(r"\bc\b", f"{c}u", b) for b in body)
            out.append(indent + "}")
        n = end + 1
    return "\n".join(out)


def _program(dev: Any, section: str, dmax: int, dtype: Any, want_dk: bool = True) -> Any:
    def build() -> str:
        reader = split_sections("flash_attention")[1]["rd"]
        readers = [reader.replace("{{ARR}}", a).replace("{{STRIDES}}", STRIDES[a]) for a in READERS[section]]
        sections = section + KV_TILE.get(section, "")
        src = source("flash_attention", sections, dtype, INCLUDE) + "\n" + "\n".join(readers)
        src = src.replace("const DMAX: u32 = 64u;", f"const DMAX: u32 = {dmax}u;")
        src = src.replace("const BK: u32 = 32u;", f"const BK: u32 = {TILE // dmax}u;")
        src = src.replace("const WANT_DK: bool = true;", f"const WANT_DK: bool = {str(want_dk).lower()};")
        return unroll_rows(src, dmax // 4)
    return dev.programs.get(("flash_attention", section, dmax, dtype.name, want_dk), build)


def _bstrides(arg: TensorArg, to: Sequence[int]) -> list[int]:
    """arg's strides aligned right against `to`, 0 on missing and broadcast dims, padded to 4."""
    out = [0] * (len(to) - len(arg.shape)) + [0 if n == 1 else s for n, s in zip(arg.shape, arg.strides)]
    return out + [0] * (4 - len(out))


def _words(q: TensorArg, k: TensorArg, v: TensorArg, dout: TensorArg | None, bias: TensorArg, key_bias: TensorArg,
           out_offset: int, lse_offset: int, attrs: Mapping[str, Any]) -> list[int | float]:
    B, H, L, D = q.shape
    S = k.shape[2]
    p = float(attrs["dropout_p"])
    key = mix32((int(attrs["seed"]) ^ 0x9E3779B9) & MASK32)
    scale = default_scale(D, attrs["scale"])
    ds = list(dout.strides) if dout is not None else [0, 0, 0, 0]
    offsets = [q.offset, k.offset, v.offset, dout.offset if dout is not None else 0, bias.offset, key_bias.offset,
               out_offset, lse_offset]
    return [B, H, L, S, D, int(bool(attrs["is_causal"])), int(p > 0.0), float(scale), key, threshold(p),
            int(attrs["offset"]) & MASK32, float(1.0 / (1.0 - p)), 0, 0, *q.strides, *k.strides, *v.strides, *ds,
            *_bstrides(bias, (B, H, L, S)), *_bstrides(key_bias, (B, S)), *offsets]


def _grid(dev: Any, rows: int, bh: int) -> tuple[int, int, int]:
    blocks = math.ceil(rows / WG)
    if blocks > dev.max_groups or bh > dev.max_groups:
        raise RumusError(f"flash_attention: {bh} batch*heads x {blocks} row blocks exceed this device's "
                         f"dispatch limit of {dev.max_groups} workgroups per dimension")
    return blocks, bh, 1


def flash_attention(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out, lse), (q, k, v, bias, key_bias) = outputs, inputs
    B, H, L, D = q.shape
    if B * H * L == 0:
        return
    dev = device_of(outputs, inputs)
    prog = _program(dev, "forward", head_bucket(D), q.dtype)
    words = _words(q, k, v, None, bias, key_bias, out.offset, lse.offset, attrs)
    dev.recorder.dispatch(prog, [out.buffer, lse.buffer, q.buffer, k.buffer, v.buffer, bias.buffer, key_bias.buffer],
                          pack([0, 0, *words]), _grid(dev, L, B * H))


def flash_attention_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                             attrs: Mapping[str, Any]) -> None:
    (dq, dk, dv), (q, k, v, out, dout, lse, bias, key_bias) = outputs, inputs
    B, H, L, D = q.shape
    S = k.shape[2]
    if B * H * S * D == 0:
        return
    dev = device_of(outputs, inputs)
    dmax, rows = head_bucket(D), B * H * L
    stats = new_buffer(dev, rows * 8, "flash attention lse and D")
    words = _words(q, k, v, dout, bias, key_bias, out.offset, lse.offset, attrs)
    dispatch(dev, "flash_attention", "rowdot", q.dtype, [stats, out.buffer, dout.buffer, lse.buffer], words, rows,
             include=("grid", *INCLUDE))
    masks = [bias.buffer, key_bias.buffer]
    for grad, want_dk in ((dk, True), (dv, False)):
        words_kv = _words(q, k, v, dout, bias, key_bias, grad.offset, lse.offset, attrs)
        dev.recorder.dispatch(_program(dev, "dkdv", dmax, q.dtype, want_dk),
                              [grad.buffer, q.buffer, k.buffer, v.buffer, dout.buffer, stats, *masks],
                              pack([0, 0, *words_kv]), _grid(dev, S, B * H))
    words_dq = _words(q, k, v, dout, bias, key_bias, dq.offset, lse.offset, attrs)
    dev.recorder.dispatch(_program(dev, "dq", dmax, q.dtype),
                          [dq.buffer, q.buffer, k.buffer, v.buffer, dout.buffer, stats, *masks],
                          pack([0, 0, *words_dq]), _grid(dev, L, B * H))


def kernels() -> dict[str, Any]:
    return {"flash_attention": flash_attention, "flash_attention_backward": flash_attention_backward}

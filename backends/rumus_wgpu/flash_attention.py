"""FlashAttention forward and backward (shaders/flash_attention.wgsl): tiled online softmax, one workgroup per
(batch * head, block of BR rows), K/V (or Q/dOut) tiles in workgroup memory, O(L) extra memory.

An invocation owns one whole row (`plan`): 4-row tiles over subgroup lanes, each workgroup-memory load
feeding 4 rows, measured slower on the H200 (causal fwd+bwd [4,16,1024,64] 7.03 ms against 5.38 whole-row,
[1,16,4096,64] 21.4 against 17.0; `benchmarks/attention.py`), so the kernels have that one plan. The
backward is FlashAttention-2's, in three dispatches: a row pass (lse and D = dout . out per query row into
one scratch buffer), a dK/dV pass with one workgroup per key block iterating over query blocks, and a dQ
pass with one workgroup per query block iterating over key blocks: no atomics, deterministic. q, k, v and
dout may be strided (an [B, S, H, D] tensor transposed to [B, H, S, D] is read in place); bias and key_bias
come contiguous and broadcast through zero strides, and a one-element bias (the 0-d zeros of "no mask") is
compiled out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rumus_contracts import DType, KernelNotFound, RumusError, TensorArg, bfloat16, float16, float32
from rumus_contracts.ops.attention import default_scale

from . import bf16, matrix_attention
from .layout import WG, device_of, grid, new_buffer
from .nn_common import pack, source, split_sections
from .pipelines import shader_source, wgsl_scalar, with_scalar
from .nn_dropout import MASK32, mix32, threshold

TILE = 2048  # floats per workgroup tile (the shader's arrays): BK = TILE / DMAX rows


def head_bucket(d: int) -> int:
    return 32 if d <= 32 else 64 if d <= 64 else 128


@dataclass(frozen=True)
class Plan:
    """How one kernel splits its work (the shader's constants): RT rows per invocation, each row's DMAX / 4
    vec4s over LANES invocations (LV each), WG invocations, so BR = WG / LANES * RT rows per workgroup."""
    dmax: int
    lanes: int
    rt: int
    wg: int

    @property
    def lv(self) -> int:
        return self.dmax // 4 // self.lanes

    @property
    def rows(self) -> int:
        return self.wg // self.lanes * self.rt


def plan(d: int) -> Plan:
    """One whole row of head dim `d` (bucketed) per invocation, 64 invocations per workgroup."""
    return Plan(head_bucket(d), 1, 1, 64)


# the arrays whose rows each kernel reads and writes, with the Config field of their strides: one copy of
# the shader's `rd` (`wr`) section per array (a reader names the kernel's binding, so each kernel gets its own)
READERS = {"forward": ("q", "k", "v"), "dkdv": ("q", "k", "v", "dout"), "dq": ("q", "k", "v", "dout")}
WRITERS = {"forward": ("out",), "dkdv": ("dk", "dv"), "dq": ("dq",)}
STRIDES = {"q": "qs", "k": "ks", "v": "vs", "dout": "os"}
OFFSETS = {"q": "x", "k": "y", "v": "z", "dout": "w"}  # each array's element offset: a component of cfg.off[0]
KV_TILE = {"forward": "+kv_tile", "dq": "+kv_tile"}  # the kernels that stream K and V tiles past query rows
INCLUDE = ("dropout_hash",)  # the dropout mask's hash, shared with the dropout op

UNROLL = re.compile(r"^(\s*)for \(var (\w+) = 0u; \2 < (\w+); \2\+\+\) \{$")


def unroll(src: str, bounds: Mapping[str, int]) -> str:
    """Every `for (var X = 0u; X < N; X++) { ... }` loop with N in `bounds` written out N times with X a
    constant (nested loops too): arrays indexed only by constants stay in registers, where a loop index
    (if the driver does not unroll) would put them in slow local memory."""
    out: list[str] = []
    lines = src.split("\n")
    n = 0
    while n < len(lines):
        found = UNROLL.match(lines[n])
        if found is None or found.group(3) not in bounds:
            out.append(lines[n])
            n += 1
            continue
        indent, var, bound = found.groups()
        end = lines.index(indent + "}", n + 1)
        body = unroll("\n".join(lines[n + 1:end]), bounds)
        for c in range(bounds[bound]):  # each copy in a block of its own: the body's `let`s are declared once per copy
            out.append(indent + "{")
            out.append(re.sub(rf"\b{var}\b", f"{c}u", body))
            out.append(indent + "}")
        n = end + 1
    return "\n".join(out)


def _program(dev: Any, section: str, p: Plan, dtype: Any, has_bias: bool, has_kbias: bool) -> Any:
    def build() -> str:
        parts = split_sections("flash_attention")[1]
        arrays = [parts["rd"].replace("{{ARR}}", a).replace("{{STRIDES}}", STRIDES[a]).replace("{{OFF}}", OFFSETS[a])
                  for a in READERS[section]]
        arrays += [parts["wr"].replace("{{ARR}}", a) for a in WRITERS[section]]
        src = source("flash_attention", f"{section}+lanes_none+masks{KV_TILE.get(section, '')}", float32, INCLUDE)
        src = with_accessors(src + "\n" + "\n".join(arrays), dtype)
        for name, value in (("DMAX", f"{p.dmax}u"), ("BK", f"{TILE // p.dmax}u"), ("LV", f"{p.lv}u"),
                            ("RT", f"{p.rt}u"), ("WG", f"{p.wg}u"), ("HAS_BIAS", str(has_bias).lower()),
                            ("HAS_KBIAS", str(has_kbias).lower())):
            src, count = re.subn(rf"^const {name}: (\w+) = [^;]+;", f"const {name}: \\1 = {value};", src, flags=re.M)
            assert count == 1, name
        return finish(unroll(src, {"RT": p.rt, "LV": p.lv, "V4": p.dmax // 4}), dtype)
    key = ("flash_attention", section, p, dtype.name, has_bias, has_kbias)
    return dev.programs.get(key, build)


# a storage binding of the kernel's element type: read through ld_NAME, written through put_NAME / put4_NAME
ELEMENT_BINDING = re.compile(r"var<storage, (read|read_write)> (\w+): array<scalar>;")


def with_accessors(src: str, dtype: DType) -> str:
    """`src` with a loader for each read-only binding of elements and a writer for each output, from the
    shader's ld / put sections. bfloat16 (16-bit words, two per u32: bf16.py) binds inputs as u32 words
    and outputs as atomic words, with the ld_bf16 / put_bf16 accessors; math stays f32."""
    parts = split_sections("flash_attention")[1]
    words = bf16.is_bf16(dtype)
    suffix = "_bf16" if words else ""
    extra = [parts[("ld" if access == "read" else "put") + suffix].replace("{{ARR}}", name)
             for access, name in ELEMENT_BINDING.findall(src)]
    if words:
        src = ELEMENT_BINDING.sub(lambda m: f"var<storage, {m[1]}> {m[2]}: "
                                  f"array<{'u32' if m[1] == 'read' else 'atomic<u32>'}>;", src)
        src = "\n".join((shader_source("bf16"), src))
    return "\n".join((src, *extra))


def finish(src: str, dtype: DType) -> str:
    """The element type set (float16: `scalar` is f16; float32 and bfloat16 words: f32 math and no f16)."""
    if bf16.is_bf16(dtype):
        if "i64_" in src:  # bf16.wgsl's integer conversions call the int64 helpers
            src = shader_source("int64") + "\n" + src
        if "{{" in src:
            raise AssertionError(f"unfilled shader slot near: {src[src.index('{{'):][:40]}")
        return src
    return with_scalar(src, wgsl_scalar(dtype))


def _bstrides(arg: TensorArg, to: Sequence[int]) -> list[int]:
    """arg's strides aligned right against `to`, 0 on missing and broadcast dims, padded to 4."""
    out = [0] * (len(to) - len(arg.shape)) + [0 if n == 1 else s for n, s in zip(arg.shape, arg.strides)]
    return out + [0] * (4 - len(out))


def _words(q: TensorArg, k: TensorArg, v: TensorArg, dout: TensorArg | None, bias: TensorArg, key_bias: TensorArg,
           out_offset: int, lse_offset: int, attrs: Mapping[str, Any], dv_offset: int = 0) -> list[int | float]:
    B, H, L, D = q.shape
    S = k.shape[2]
    p = float(attrs["dropout_p"])
    key = mix32((int(attrs["seed"]) ^ 0x9E3779B9) & MASK32)
    scale = default_scale(D, attrs["scale"])
    ds = list(dout.strides) if dout is not None else [0, 0, 0, 0]
    offsets = [q.offset, k.offset, v.offset, dout.offset if dout is not None else 0, bias.offset, key_bias.offset,
               out_offset, lse_offset]
    return [B, H, L, S, D, int(bool(attrs["is_causal"])), int(p > 0.0), float(scale), key, threshold(p),
            int(attrs["offset"]) & MASK32, float(1.0 / (1.0 - p)), dv_offset, 0, *q.strides, *k.strides,
            *v.strides, *ds, *_bstrides(bias, (B, H, L, S)), *_bstrides(key_bias, (B, S)), *offsets]


def _grid(dev: Any, rows: int, per_group: int, bh: int) -> tuple[int, int, int]:
    blocks = math.ceil(rows / per_group)
    if blocks > dev.max_groups or bh > dev.max_groups:
        raise RumusError(f"flash_attention: {bh} batch*heads x {blocks} row blocks exceed this device's "
                         f"dispatch limit of {dev.max_groups} workgroups per dimension")
    return blocks, bh, 1


def _run(dev: Any, section: str, q: TensorArg, bias: TensorArg, key_bias: TensorArg, buffers: list[Any],
         words: list[int | float], rows: int) -> None:
    """One attention kernel over `rows` rows (queries, or keys in the dK/dV pass) of every (batch, head)."""
    B, H, _, D = q.shape
    p = plan(D)
    has_bias, has_kbias = math.prod(bias.shape) > 1, math.prod(key_bias.shape) > 1
    prog = _program(dev, section, p, q.dtype, has_bias, has_kbias)
    dev.recorder.dispatch(prog, buffers, pack([0, 0, *words]), _grid(dev, rows, p.rows, B * H))


def _rowdot(dev: Any, dtype: DType, buffers: list[Any], words: list[int | float], rows: int) -> None:
    """The backward's row pass (lse and D per query row into the stats scratch), one item per row."""
    def build() -> str:
        src = source("flash_attention", "rowdot+lanes_none", float32, ("grid", *INCLUDE))
        return finish(with_accessors(src, dtype), dtype)
    prog = dev.programs.get(("flash_attention", "rowdot", dtype.name), build)
    x, y, _ = grid((rows + WG - 1) // WG, dev.max_groups)
    dev.recorder.dispatch(prog, buffers, pack([rows, x, *words]), (x, y, 1))


def flash_attention(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    (out, lse), (q, k, v, bias, key_bias) = outputs, inputs
    B, H, L, D = q.shape
    if B * H * L == 0:
        return
    dev = device_of(outputs, inputs)
    if q.dtype == float16 and matrix_attention.try_forward(out, lse, q, k, v, bias, key_bias, attrs, dev):
        return
    words = _words(q, k, v, None, bias, key_bias, out.offset, lse.offset, attrs)
    _run(dev, "forward", q, bias, key_bias,
         [out.buffer, lse.buffer, q.buffer, k.buffer, v.buffer, bias.buffer, key_bias.buffer], words, L)


def flash_attention_backward(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg],
                             attrs: Mapping[str, Any]) -> None:
    (dq, dk, dv), (q, k, v, out, dout, lse, bias, key_bias) = outputs, inputs
    B, H, L, D = q.shape
    S = k.shape[2]
    if B * H * S * D == 0:
        return
    dev = device_of(outputs, inputs)
    if dev.limits.get("max-storage-buffers-per-shader-stage", 8) < 9:
        err = KernelNotFound("flash_attention_backward", "wgpu", q.dtype, ["cpu"])
        err.args = (f"{err.args[0]} (The dK/dV pass binds 9 storage buffers; this device allows fewer per "
                    f"shader stage.)",)
        raise err
    rows = B * H * L
    stats = new_buffer(dev, rows * 8, "flash attention lse and D")
    words = _words(q, k, v, dout, bias, key_bias, out.offset, lse.offset, attrs)
    _rowdot(dev, q.dtype, [stats, out.buffer, dout.buffer, lse.buffer], words, rows)
    if q.dtype == float16 and matrix_attention.try_backward(dev, dq, dk, dv, q, k, v, dout, stats, bias, key_bias,
                                                            attrs):
        return
    ins = [q.buffer, k.buffer, v.buffer, dout.buffer, stats, bias.buffer, key_bias.buffer]
    _run(dev, "dkdv", q, bias, key_bias, [dk.buffer, dv.buffer, *ins],
         _words(q, k, v, dout, bias, key_bias, dk.offset, lse.offset, attrs, dv.offset), S)
    _run(dev, "dq", q, bias, key_bias, [dq.buffer, *ins],
         _words(q, k, v, dout, bias, key_bias, dq.offset, lse.offset, attrs), L)


# float16 needs shader-f16 (the backend lists float16 only on devices with it); bfloat16 is native words
DTYPES: tuple[DType, ...] = (float32, float16, bfloat16)


def kernels() -> dict[str, Any]:
    return {"flash_attention": flash_attention, "flash_attention_backward": flash_attention_backward}

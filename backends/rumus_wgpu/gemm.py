"""GEMM / batched GEMM: a generator of fully unrolled tiled WGSL kernels, and the matmul kernel.

Operand layouts pick the load code: A row-major ("k4": vec4 along K), A transposed ("m4": vec4 along
M), B row-major ("n4"), B transposed ("k4", e.g. a `weight.T` view), or any strides ("s": scalar
loads). Vector paths need the vectorised dim, strides and offsets to be multiples of 4, so a vec4
is either wholly inside the matrix or wholly outside; edges are zero-filled on load and masked on
store. Batch dims broadcast through per-dim strides (stride 0); a batch that B does not have is
folded into A's rows. Small grids split K across workgroups into a float32 workspace that the sum
reduction then folds into C.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rumus_contracts import RumusError, TensorArg, contiguous_strides, float32

from . import bf16, knobs
from .elementwise import copy
from .layout import coalesce, dealias, device_of, env_set, new_buffer, remember
from .pipelines import CHECKED, render, wgsl_scalar
from .pool import WgpuBuffer

GEMM_ENV = "RUMUS_WGPU_GEMM"  # set: every GEMM on this tile[:split-K] (A/B runs, tests of each tile)
BF16 = "bf16"  # the generator's name for bfloat16 words (no WGSL scalar type)


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


TILES: dict[str, Tile] = {
    "128x128": Tile(128, 128, 8, 8, 8),    # 256 invocations, 64 outputs each
    "128x128k16": Tile(128, 128, 16, 8, 8),  # the same with 32 KiB of workgroup memory
    "128x64": Tile(128, 64, 8, 8, 8),      # 128 invocations
    "64x64": Tile(64, 64, 8, 8, 8),        # 64 invocations
    "64x64w": Tile(64, 64, 16, 4, 4),      # 256 invocations, 16 outputs each
    "32x32": Tile(32, 32, 16, 4, 4),       # 64 invocations: small matrices
}


def _loads(total: int, threads: int) -> list[tuple[int, bool]]:
    """(element index offset j * threads, guarded) for each load an invocation performs."""
    n = (total + threads - 1) // threads
    return [(j * threads, (j + 1) * threads > total) for j in range(n)]


# bfloat16 ("bf16") operands are 16-bit words, two per u32 (bf16.py): a scalar load takes its half of a
# u32, a vec4 load two whole u32s; the tile holds f32 either way, so the inner loop is the float32 one
def _scalar_load(buf: str, idx: str, dtype: str) -> str:
    if dtype == BF16:
        return f"bf16_to_f32(({buf}[({idx}) >> 1u] >> ((({idx}) & 1u) << 4u)) & 0xffffu)"
    return f"f32({buf}[{idx}])"


def _vec_load(buf: str, idx: str, dtype: str) -> str:
    if dtype == BF16:
        return f"bf16x4({buf}[{idx}])"
    return f"vec4<f32>({buf}[{idx}])"


def _storage(dtype: str, vec: bool) -> str:
    """The element type of a binding: vec4 of the scalar, or for bfloat16 words a u32 (two per vec4: vec2)."""
    if dtype == BF16:
        return "vec2<u32>" if vec else "u32"
    return f"vec4<{dtype}>" if vec else dtype


def _operand(side: str, mode: str, tile: Tile, dtype: str) -> tuple[list[str], list[str], list[str]]:
    """(declarations, global->register loads, register->workgroup stores) for operand A or B."""
    outer, tname, bufname = (tile.bm, "a_tile", "a") if side == "a" else (tile.bn, "b_tile", "b")
    bk, nt = tile.bk, tile.threads
    limit = "cfg.m" if side == "a" else "cfg.n"
    base = "m0" if side == "a" else "n0"
    s_outer, s_k = ("cfg.sam", "cfg.sak") if side == "a" else ("cfg.sbn", "cfg.sbk")
    q = outer // 4
    buf = f"dst * {bk * q}u"
    decls, loads, stores = [], [], []
    if mode == "s":
        for j, (off, guard) in enumerate(_loads(outer * bk, nt)):
            e = f"(lid + {off}u)"
            decls += [f"    let {side}o{j} = {e} % {outer}u;", f"    let {side}k{j} = {e} / {outer}u;",
                      f"    var {side}r{j} = 0.0;"]
            valid = f"{base} + {side}o{j} < {limit} && k0 + {side}k{j} < kend"
            if guard:
                valid += f" && {e} < {outer * bk}u"
            idx = f"{side}_off + ({base} + {side}o{j}) * {s_outer} + (k0 + {side}k{j}) * {s_k}"
            loads.append(f"            if ({valid}) {{ {side}r{j} = {_scalar_load(bufname, idx, dtype)}; }} "
                         f"else {{ {side}r{j} = 0.0; }}")
            st: str | list[str] = f"{tname}[{buf} + {side}k{j} * {q}u + {side}o{j} / 4u][{side}o{j} % 4u] = {side}r{j};"
            stores.append(f"            if ({e} < {outer * bk}u) {{ {st} }}" if guard else f"            {st}")
        return decls, loads, stores
    vec_k = mode == "k4"  # vec4 along K (A row-major, B transposed), else along the outer dim
    total = outer * bk // 4
    for j, (off, guard) in enumerate(_loads(total, nt)):
        e = f"(lid + {off}u)"
        if vec_k:
            decls += [f"    let {side}o{j} = {e} / {bk // 4}u;", f"    let {side}q{j} = ({e} % {bk // 4}u) * 4u;"]
            valid = f"{base} + {side}o{j} < {limit} && k0 + {side}q{j} < kend"
            idx = f"({side}_off + ({base} + {side}o{j}) * {s_outer} + k0 + {side}q{j}) / 4u"
            st = [f"{tname}[{buf} + ({side}q{j} + {i}u) * {q}u + {side}o{j} / 4u][{side}o{j} % 4u] = {side}r{j}[{i}];"
                  for i in range(4)]
        else:
            decls += [f"    let {side}k{j} = {e} / {q}u;", f"    let {side}o{j} = ({e} % {q}u) * 4u;"]
            valid = f"k0 + {side}k{j} < kend && {base} + {side}o{j} < {limit}"
            idx = f"({side}_off + (k0 + {side}k{j}) * {s_k} + {base} + {side}o{j}) / 4u"
            st = [f"{tname}[{buf} + {side}k{j} * {q}u + {side}o{j} / 4u] = {side}r{j};"]
        if guard:
            valid += f" && {e} < {total}u"
        decls.append(f"    var {side}r{j} = vec4<f32>(0.0);")
        loads.append(f"            if ({valid}) {{ {side}r{j} = {_vec_load(bufname, idx, dtype)}; }} "
                     f"else {{ {side}r{j} = vec4<f32>(0.0); }}")
        body = " ".join(st)
        stores.append(f"            if ({e} < {total}u) {{ {body} }}" if guard else f"            {body}")
    return decls, loads, stores


def generate(tile: Tile, a_mode: str, b_mode: str, c_vec: bool, dtype: str, c_dtype: str) -> str:
    """WGSL for one tile shape, operand layouts ('k4' | 'm4' | 's', 'n4' | 'k4' | 's'), dtypes."""
    rg, cg = tile.tm // 4, tile.tn // 4
    tx = tile.bn // tile.tn
    row_step, col_step = tile.bm // rg, tile.bn // cg
    a_decl, a_load, a_store = _operand("a", a_mode, tile, dtype)
    b_decl, b_load, b_store = _operand("b", b_mode, tile, dtype)
    decls = a_decl + b_decl
    decls += [f"    var acc{i}_{h} = vec4<f32>(0.0);" for i in range(tile.tm) for h in range(cg)]
    comp = []
    qa, qb = tile.bm // 4, tile.bn // 4
    for kk in range(tile.bk):
        for g in range(rg):
            comp.append(f"        let a{kk}_{g} = a_tile[src * {tile.bk * qa}u + {kk * qa + g * row_step // 4}u + ty];")
        for h in range(cg):
            comp.append(f"        let b{kk}_{h} = b_tile[src * {tile.bk * qb}u + {kk * qb + h * col_step // 4}u + tx];")
        for g in range(rg):
            for r in range(4):
                i = g * 4 + r
                for h in range(cg):
                    comp.append(f"        acc{i}_{h} = fma(vec4<f32>(a{kk}_{g}[{r}]), b{kk}_{h}, acc{i}_{h});")
    out = []
    for g in range(rg):
        for r in range(4):
            i = g * 4 + r
            out.append(f"    let row{i} = m0 + {g * row_step}u + ty * 4u + {r}u;")
            for h in range(cg):
                col = f"n0 + {h * col_step}u + tx * 4u"
                val = f"acc{i}_{h}" if c_dtype == "f32" else f"bf16x4_words(acc{i}_{h})" if c_dtype == BF16 \
                    else f"vec4<{c_dtype}>(acc{i}_{h})"
                if c_vec:
                    out.append(f"    if (row{i} < cfg.m && {col} < cfg.n) {{ "
                               f"c[(c_off + row{i} * cfg.scm + {col}) / 4u] = {val}; }}")
                else:
                    for comp_i in range(4):
                        v = f"acc{i}_{h}[{comp_i}]" if c_dtype == "f32" else f"{c_dtype}(acc{i}_{h}[{comp_i}])"
                        out.append(f"    if (row{i} < cfg.m && {col} + {comp_i}u < cfg.n) {{ "
                                   f"c[c_off + row{i} * cfg.scm + ({col} + {comp_i}u) * cfg.scn] = {v}; }}")
    if c_dtype == BF16 and not c_vec:
        raise AssertionError("bfloat16 C is stored four elements (two whole words) at a time: c_vec only")
    words = BF16 in (dtype, c_dtype)
    return render("gemm", scalar="f32" if words else dtype, include=("bf16", "gemm_bf16") if words else (),
                  C_TYPE=_storage(c_dtype, c_vec), A_TYPE=_storage(dtype, a_mode != "s"),
                  B_TYPE=_storage(dtype, b_mode != "s"),
                  A_TILE=str(2 * tile.bk * qa), B_TILE=str(2 * tile.bk * qb), THREADS=str(tile.threads),
                  BK=str(tile.bk), BM=str(tile.bm), BN=str(tile.bn), TX=str(tx),
                  DECLS="\n".join(decls), LOAD_TILE="\n".join(a_load + b_load),
                  STORE_TILE="\n".join(a_store + b_store), COMPUTE="\n".join(comp), STORE_C="\n".join(out))


# -- the matmul kernel ---------------------------------------------------------------------------

def _batch(a: TensorArg, b: TensorArg, c: TensorArg) -> tuple[list[int], list[list[int]], int, int, int]:
    """Coalesced batch sizes, their [A, B, C] strides, and M with the row strides of A and C after
    folding the batch dims that B broadcasts into the rows."""
    bshape = c.shape[:-2]
    nb = len(bshape)

    def strides(t: TensorArg) -> list[int]:
        pad = nb - (len(t.shape) - 2)
        return [0 if i < pad or t.shape[i - pad] == 1 else t.strides[i - pad] for i in range(nb)]
    sa, sb, sc = strides(a), strides(b), strides(c)
    m = a.shape[-2]
    sam = a.strides[-2] if m > 1 else 0
    scm = c.strides[-2] if m > 1 else 0
    sizes, dims = coalesce(bshape, [sa, sb, sc])
    # fold the innermost batch dim into M when B does not vary along it and A, C rows continue it
    while sizes and dims[-1][1] == 0 and (m == 1 or (dims[-1][0] == m * sam and dims[-1][2] == m * scm)):
        size, (bsa, _, bsc) = sizes.pop(), dims.pop()
        if m == 1:
            sam, scm = bsa, bsc
        m *= size
    return sizes, dims, m, sam, scm


def _vec_ok(*values: int) -> bool:
    return all(v % 4 == 0 for v in values)


def _plan(m: int, n: int, k: int, nbatch: int) -> tuple[str, int]:
    """Tile and split-K count for a problem. Any choice is correct; these follow an H200 sweep (fp32,
    TFLOP/s): 64x64 (8x8 per invocation, 64 invocations) is best once there are >= 1024 128x128
    tiles (n = 4096: 34.4, n = 8192: 36.7), 128x128 around one wave of them (n = 2048: 32.9), and the
    256-invocation 64x64 tile with 4x4 outputs each below that (n = 1024: 26.8 against 13.2 for
    128x128 and 23.3 for 128x128 split 4 ways). Few tiles over a long K split K instead
    (256x4096x4096: 128x128 split 4 ways 30.5, against 27.2 for the 64x64 tile)."""
    forced = knobs.value(GEMM_ENV)
    if isinstance(forced, str) and forced:
        name, _, splits = forced.partition(":")
        return name, int(splits or 1)

    def tiles(name: str) -> int:
        t = TILES[name]
        return ((m + t.bm - 1) // t.bm) * ((n + t.bn - 1) // t.bn) * nbatch
    if m * n * nbatch <= 64 * 64 * 4 or min(m, n) < 48:
        return "32x32", 1
    if tiles("128x128") >= 1024:
        return "64x64", 1
    if tiles("128x128") >= 192:
        return "128x128", 1
    if tiles("128x128") >= 32 and k >= 2048:
        return "128x128", max(2, min(8, 256 // tiles("128x128")))
    t64 = tiles("64x64w")
    if t64 < 128 and k >= 1024:  # few output tiles over a long K: split K to fill the GPU
        return "64x64w", max(1, min(8, 256 // t64, k // 256))
    return "64x64w", 1


def _element(dtype: Any) -> str:
    """The generator's element name: the WGSL scalar, or BF16 for bfloat16 words."""
    return BF16 if bf16.is_bf16(dtype) else wgsl_scalar(dtype)


def matmul(outputs: Sequence[TensorArg], inputs: Sequence[TensorArg], attrs: Mapping[str, Any]) -> None:
    """C = A @ B. A single-dispatch launch is cached per device by the operands' layouts (no planning
    or packing when a training loop repeats a shape); split-K launches always take the full path."""
    c = outputs[0]
    a, b = inputs
    cb = c.buffer
    if isinstance(cb, WgpuBuffer) and a.buffer is not cb and b.buffer is not cb and not env_set(GEMM_ENV):
        key: tuple[Any, ...] | None = ("gemm", c.shape, c.strides, c.offset, c.dtype, a.shape, a.strides,
                                       a.offset, a.dtype, b.shape, b.strides, b.offset, b.dtype, env_set(CHECKED))
        plans = cb.dev.launch_plans
        try:
            hit = plans.get(key)
        except TypeError:  # unhashable shape or strides (lists): no caching
            hit, key = None, None
        if hit is not None:
            if hit[0] is not None:
                cb.dev.recorder.dispatch(hit[0], [cb, a.buffer, b.buffer], hit[1], hit[2])
            return
        launch = _matmul(c, a, b)
        if key is not None and launch is not None:
            remember(plans, key, launch)
        return
    _matmul(c, a, b)


def _matmul(c: TensorArg, a: TensorArg, b: TensorArg) -> tuple[Any, bytes | None, tuple[int, int, int]] | None:
    """Record C = A @ B; returns the launch when it was one dispatch into C (cacheable), else None."""
    outputs, inputs = [c], [a, b]
    if c.numel == 0:
        return None, None, (0, 0, 0)
    dev = device_of(outputs, inputs)
    a, b = dealias(dev, outputs, [a, b])[0]
    if any(s < 0 for t in (a, b, c) for s in t.strides):
        raise RumusError("wgpu matmul: negative strides are not supported; make the operand contiguous")
    k, n = a.shape[-1], c.shape[-1]
    sizes, dims, m, sam, scm = _batch(a, b, c)
    sak = a.strides[-1] if k > 1 else 0
    sbk = b.strides[-2] if k > 1 else 0
    sbn = b.strides[-1] if n > 1 else 0
    scn = c.strides[-1] if n > 1 else 0
    if len(sizes) > 4:
        raise RumusError(f"wgpu matmul: more than 4 non-mergeable batch dims ({c.shape})")
    nbatch = 1
    for s in sizes:
        nbatch *= s
    bsa, bsb, bsc = ([d[i] for d in dims] for i in range(3))
    tile_name, splits = _plan(m, n, k, nbatch)
    tile = TILES[tile_name]
    if k < 2 * tile.bk * splits or len(sizes) > 1:
        splits = 1
    while splits > 1 and splits * nbatch * m * n * 4 > dev.max_binding:
        splits //= 2
    a_mode = "k4" if sak == 1 and _vec_ok(k, sam, a.offset, *bsa) else \
        "m4" if sam == 1 and _vec_ok(m, sak, a.offset, *bsa) else "s"
    b_mode = "n4" if sbn == 1 and _vec_ok(n, sbk, b.offset, *bsb) else \
        "k4" if sbk == 1 and _vec_ok(k, sbn, b.offset, *bsb) else "s"
    dtype = _element(a.dtype)
    if splits > 1:
        kchunk = ((k + splits - 1) // splits + tile.bk - 1) // tile.bk * tile.bk
        splits = (k + kchunk - 1) // kchunk
    if splits > 1:
        work = new_buffer(dev, splits * nbatch * m * n * 4, "split-K workspace")
        target, c_off, c_dtype = work, 0, "f32"
        w_scm, w_scn, split_stride = n, 1, nbatch * m * n
        w_bsc: list[int] = []
        acc = nbatch * m * n
        for s in reversed(sizes):
            acc //= s
            w_bsc.insert(0, acc)
        c_vec = n % 4 == 0
    else:
        kchunk, target, c_off, c_dtype = max(k, 1), c.buffer, c.offset, _element(c.dtype)
        w_scm, w_scn, split_stride, w_bsc = scm, scn, 0, bsc
        c_vec = scn == 1 and _vec_ok(n, scm, c.offset, *bsc)
    if bf16.is_bf16(c.dtype) and (splits > 1 or not c_vec):
        # bfloat16 C is stored as whole words (4 elements of one invocation's row); a C another layout
        # (or split-K's sum) would write half words of, goes through a float32 C rounded once by copy
        wide = TensorArg(new_buffer(dev, max(c.numel, 1) * 4, "bfloat16 GEMM result"), tuple(c.shape),
                         contiguous_strides(tuple(c.shape)), 0, float32)
        _matmul(wide, a, b)
        copy([c], [wide], {"dtype": c.dtype.name})
        return None
    key = ("gemm", tile_name, a_mode, b_mode, c_vec, dtype, c_dtype, env_set(CHECKED))
    prog = dev.programs.get(key, lambda: generate(tile, a_mode, b_mode, c_vec, dtype, c_dtype), trusted=True)
    gx, gy = (n + tile.bn - 1) // tile.bn, (m + tile.bm - 1) // tile.bm
    if max(gx, gy) > dev.max_groups:
        raise RumusError(f"wgpu matmul: a {m}x{n} result exceeds the dispatch grid of {dev.name}")
    pad4 = [0] * (4 - len(sizes))
    total_z = nbatch * splits
    for zbase in range(0, total_z, dev.max_groups):
        gz = min(dev.max_groups, total_z - zbase)
        data = struct.pack("<33I", m, n, k, kchunk, a.offset, b.offset, c_off, nbatch, sam, sak, sbk, sbn,
                           w_scm, w_scn, split_stride, len(sizes), *sizes, *([1] * len(pad4)), *bsa, *pad4,
                           *bsb, *pad4, *w_bsc, *pad4, zbase)
        dev.recorder.dispatch(prog, [target, a.buffer, b.buffer], data, (gx, gy, gz))
    if splits == 1 and total_z <= dev.max_groups:
        return prog, data, (gx, gy, total_z)
    if splits > 1:
        from .reduce import reduce_kernel
        ws = TensorArg(work, (splits, nbatch, m, n), (nbatch * m * n, m * n, n, 1), 0, float32)
        cb = bsc[0] if sizes else 0  # at most one batch dim when split
        cv = TensorArg(c.buffer, (1, nbatch, m, n), (0, cb, scm, scn), c.offset, c.dtype)
        reduce_kernel("sum")([cv], [ws], {"dims": (0,)})
    return None

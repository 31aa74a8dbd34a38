"""A generator of float16 GEMM kernels on matrix units (WGSL `chromium_experimental_subgroup_matrix`,
Dawn only): shaders/gemm_subgroup_matrix.wgsl with its slots unrolled for one tile shape and layout.

A `MatrixTile` is a workgroup block of C (bm x bn, K staged bk at a time) split over a wm x wn grid of
subgroups, each owning (bm / wm) x (bn / wn) of C as 16x16 result matrices. Operands are copied into
workgroup memory in their stored layout, 8 f16 (one vec4<u32>) per load, so every row stride, offset
and the copied extent (K, or M for a transposed A, N for B) must be a multiple of 8; rows of the
workgroup copy are padded by 8 f16 so that consecutive rows start in different banks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pipelines import render

LANES = 32  # the subgroup size of the f16 16x16 configs this generator targets (NVIDIA)
PAD = 8
ACTIVATIONS = ("", "relu", "gelu_tanh")


@dataclass(frozen=True)
class MatrixTile:
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    double: bool = True  # two workgroup buffers: next tile's global loads overlap this tile's math
    group: int = 0  # > 0: workgroups walk C in column bands of this many block rows (L2 reuse)

    @property
    def subgroups(self) -> int:
        return self.wm * self.wn

    @property
    def threads(self) -> int:
        return LANES * self.subgroups

    @property
    def tm(self) -> int:
        return self.bm // self.wm // 16

    @property
    def tn(self) -> int:
        return self.bn // self.wn // 16

    def name(self) -> str:
        return (f"{self.bm}x{self.bn}x{self.bk}_{self.wm}x{self.wn}" + ("" if self.double else "_single")
                + (f"_g{self.group}" if self.group else ""))

    def shared_bytes(self, a_trans: bool, b_trans: bool, direct: bool) -> int:
        a_rows, a_stride = _shape(self, "a", a_trans)
        b_rows, b_stride = _shape(self, "b", b_trans)
        bufs = 2 if self.double else 1
        scratch = 0 if direct else self.subgroups * 256 * 4
        return bufs * 2 * (a_rows * a_stride + b_rows * b_stride) + scratch

    def check(self) -> None:
        if self.bm % (16 * self.wm) or self.bn % (16 * self.wn) or self.bk % 16:
            raise ValueError(f"matrix tile {self.name()}: each subgroup needs whole 16x16 tiles and BK % 16 == 0")


def _shape(tile: MatrixTile, side: str, trans: bool) -> tuple[int, int]:
    """(rows, padded row stride) of an operand's workgroup copy, in its stored layout."""
    outer = tile.bm if side == "a" else tile.bn
    # stored layouts: A (m, k) or transposed (k, m); B (k, n) or transposed (n, k)
    rows, cols = ((outer, tile.bk) if not trans else (tile.bk, outer)) if side == "a" else \
        ((tile.bk, outer) if not trans else (outer, tile.bk))
    return rows, cols + PAD


def _operand(tile: MatrixTile, side: str, trans: bool, exact: bool) -> tuple[list[str], list[str], list[str], int]:
    """(register declarations, global loads into them, stores into buffer `dst`, buffer size). `exact`:
    the launch's M, N and K are multiples of the block, so no load needs a bounds check."""
    rows, stride = _shape(tile, side, trans)
    cols = stride - PAD
    size = rows * stride
    # which of (row, col) of the stored tile runs along K, and the limits and origins of each
    k_is_row = (side == "a" and trans) or (side == "b" and not trans)
    outer_origin, outer_limit = ("m0", "cfg.m") if side == "a" else ("n0", "cfg.n")
    r0, rlim = ("k0", "cfg.k") if k_is_row else (outer_origin, outer_limit)
    c0, clim = (outer_origin, outer_limit) if k_is_row else ("k0", "cfg.k")
    ld, off, buf, put = f"cfg.ld{side}", f"{side}_off", side, f"put_{side}"
    chunks_per_row = cols // 8
    total = rows * chunks_per_row
    decls, loads, stores = [], [], []
    for j in range((total + tile.threads - 1) // tile.threads):
        e = f"(lid + {j * tile.threads}u)"
        guard = (j + 1) * tile.threads > total
        decls += [f"    let {side}r{j} = {e} / {chunks_per_row}u;",
                  f"    let {side}c{j} = ({e} % {chunks_per_row}u) * 8u;",
                  f"    var {side}v{j} = vec4<u32>(0u);"]
        valid = f"{r0} + {side}r{j} < {rlim} && {c0} + {side}c{j} < {clim}"
        if guard:
            valid += f" && {e} < {total}u"
        idx = f"({off} + ({r0} + {side}r{j}) * {ld} + {c0} + {side}c{j}) / 8u"
        if exact and not guard:
            loads.append(f"        {side}v{j} = {buf}[{idx}];")
        else:
            loads.append(f"        if ({valid}) {{ {side}v{j} = {buf}[{idx}]; }} "
                         f"else {{ {side}v{j} = vec4<u32>(0u); }}")
        st = f"{put}(dst * {size}u + {side}r{j} * {stride}u + {side}c{j}, {side}v{j});"
        stores.append(f"        if ({e} < {total}u) {{ {st} }}" if guard else f"        {st}")
    return decls, loads, stores, size


def _compute(tile: MatrixTile, a_trans: bool, b_trans: bool, a_size: int, b_size: int) -> list[str]:
    """One BK step of the subgroup's math on buffer `src`: TM left and TN right loads per 16 of K."""
    _, a_stride = _shape(tile, "a", a_trans)
    _, b_stride = _shape(tile, "b", b_trans)
    left, right = "subgroup_matrix_left<f16, 16, 16>", "subgroup_matrix_right<f16, 16, 16>"
    out = []
    for kk in range(tile.bk // 16):
        for i in range(tile.tm):
            row = f"wm_off + {16 * i}u"
            off = (f"src * {a_size}u + ({kk * 16}u) * {a_stride}u + {row}" if a_trans
                   else f"src * {a_size}u + ({row}) * {a_stride}u + {kk * 16}u")
            out.append(f"        let fa{kk}_{i} = subgroupMatrixLoad<{left}>(&a_sh, {off}, {str(a_trans).lower()}, "
                       f"{a_stride}u);")
        for j in range(tile.tn):
            col = f"wn_off + {16 * j}u"
            off = (f"src * {b_size}u + ({col}) * {b_stride}u + {kk * 16}u" if b_trans
                   else f"src * {b_size}u + ({kk * 16}u) * {b_stride}u + {col}")
            out.append(f"        let fb{kk}_{j} = subgroupMatrixLoad<{right}>(&b_sh, {off}, {str(b_trans).lower()}, "
                       f"{b_stride}u);")
        for i in range(tile.tm):
            for j in range(tile.tn):
                out.append(f"        acc{i}_{j} = subgroupMatrixMultiplyAccumulate(fa{kk}_{i}, fb{kk}_{j}, "
                           f"acc{i}_{j});")
    return out


def _epilogue(tile: MatrixTile, c_dtype: str, direct: bool, bias: str, activation: str) -> list[str]:
    out = []
    if direct:  # f32 C, whole blocks: the result matrices go straight to global memory
        for i in range(tile.tm):
            for j in range(tile.tn):
                out.append(f"    subgroupMatrixStore(&c, c_off + (m0 + wm_off + {16 * i}u) * cfg.ldc + n0 + wn_off + "
                           f"{16 * j}u, acc{i}_{j}, false, cfg.ldc);")
        return out
    # scratch region s is written by subgroup s and read back by invocations 32 s .. 32 s + 31 (any mapping
    # of invocations to subgroups works: the barrier orders the two)
    out += ["    let es = lid / 32u;",
            "    let lane = lid % 32u;",
            f"    let em = m0 + (es / {tile.wn}u) * {tile.bm // tile.wm}u + lane / 2u;",
            f"    let en = n0 + (es % {tile.wn}u) * {tile.bn // tile.wn}u + (lane % 2u) * 8u;",
            "    let sbase = es * 256u + (lane / 2u) * 16u + (lane % 2u) * 8u;"]
    for i in range(tile.tm):
        for j in range(tile.tn):
            out.append(f"    subgroupMatrixStore(&scratch, sid * 256u, acc{i}_{j}, false, 16u);")
            out.append("    workgroupBarrier();")
            out.append(f"    {{ let row = em + {16 * i}u; let col = en + {16 * j}u;")
            out.append("      if (row < cfg.m && col < cfg.n) {")
            out.append("        var v0 = vec4<f32>(scratch[sbase], scratch[sbase + 1u], scratch[sbase + 2u], "
                       "scratch[sbase + 3u]);")
            out.append("        var v1 = vec4<f32>(scratch[sbase + 4u], scratch[sbase + 5u], scratch[sbase + 6u], "
                       "scratch[sbase + 7u]);")
            if bias:
                cast = "vec4<f32>" if bias == "f16" else ""
                out.append(f"        v0 += {cast}(bias[(cfg.bias_off + col) / 4u]); "
                           f"v1 += {cast}(bias[(cfg.bias_off + col) / 4u + 1u]);")
            if activation == "relu":
                out.append("        v0 = max(v0, vec4<f32>(0.0)); v1 = max(v1, vec4<f32>(0.0));")
            elif activation == "gelu_tanh":
                out.append("        v0 = vec4<f32>(gelu(v0.x), gelu(v0.y), gelu(v0.z), gelu(v0.w));")
                out.append("        v1 = vec4<f32>(gelu(v1.x), gelu(v1.y), gelu(v1.z), gelu(v1.w));")
            out.append("        let ci = c_off + row * cfg.ldc + col;")
            if c_dtype == "f32":
                out.append("        c[ci / 4u] = v0; c[ci / 4u + 1u] = v1;")
            else:
                out.append("        c[ci / 8u] = vec4<u32>(bitcast<u32>(vec2<f16>(v0.xy)), "
                           "bitcast<u32>(vec2<f16>(v0.zw)), "
                           "bitcast<u32>(vec2<f16>(v1.xy)), bitcast<u32>(vec2<f16>(v1.zw)));")
            out.append("      }")
            out.append("    }")
            out.append("    workgroupBarrier();")
    return out


def generate(tile: MatrixTile, a_trans: bool, b_trans: bool, c_dtype: str = "f32", direct: bool = False,
             bias: str = "", activation: str = "", exact: bool = False) -> str:
    """WGSL for one tile, operand layouts (transposed or not), C dtype ('f32' | 'f16') and epilogue:
    `bias` '' | 'f32' | 'f16' (a vector along N added to every row), `activation` in ACTIVATIONS.
    `direct` (f32 C, no epilogue) stores whole result matrices into C: only for launches whose M and N
    are multiples of the block, as for `exact` (no bounds checks on the operand loads)."""
    tile.check()
    if direct and (c_dtype != "f32" or bias or activation):
        raise ValueError("a direct store writes f32 result matrices as they are: no bias, activation or f16 C")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; one of {ACTIVATIONS}")
    a_decl, a_load, a_store, a_size = _operand(tile, "a", a_trans, exact)
    b_decl, b_load, b_store, b_size = _operand(tile, "b", b_trans, exact)
    bufs = 2 if tile.double else 1
    decls = a_decl + b_decl + [f"    var acc{i}_{j}: subgroup_matrix_result<f32, 16, 16>;"
                               for i in range(tile.tm) for j in range(tile.tn)]
    math = _compute(tile, a_trans, b_trans, a_size, b_size)
    if tile.double:
        body = ["        let src = t % 2u;", "        let dst = 1u - src;", "        k0 = (t + 1u) * " f"{tile.bk}u;",
                "        let more = t + 1u < cfg.ktiles;", "        if (more) {", *a_load, *b_load, "        }",
                *math, "        if (more) {", *a_store, *b_store, "        }", "        workgroupBarrier();"]
    else:
        body = ["        let src = 0u;", "        let dst = 0u;", *math, "        workgroupBarrier();",
                "        k0 = (t + 1u) * " f"{tile.bk}u;", "        if (t + 1u < cfg.ktiles) {", *a_load, *b_load,
                *a_store, *b_store, "        }", "        workgroupBarrier();"]
    if tile.group:
        grid = ["    let pid = wid.y * cfg.gx + wid.x;",
                f"    let band = {tile.group}u * cfg.gx;",
                f"    let first = (pid / band) * {tile.group}u;",
                f"    let rows = min(cfg.gy - first, {tile.group}u);",
                "    let pm = first + (pid % band) % rows;",
                "    let pn = (pid % band) / rows;"]
    else:
        grid = ["    let pm = wid.y;", "    let pn = wid.x;"]
    c_type = "f32" if direct else "vec4<f32>" if c_dtype == "f32" else "vec4<u32>"
    bias_type = {"f32": "vec4<f32>", "f16": "vec4<f16>"}.get(bias, "")
    src = render("gemm_subgroup_matrix", C_TYPE=c_type,
                 BIAS_BINDING=f"@group(0) @binding(3) var<storage, read> bias: array<{bias_type}>;" if bias else "",
                 CFG_BINDING="4" if bias else "3",
                 A_SHARED=str(bufs * a_size), B_SHARED=str(bufs * b_size),
                 SCRATCH="" if direct else f"var<workgroup> scratch: array<f32, {tile.subgroups * 256}>;",
                 THREADS=str(tile.threads), BM=str(tile.bm), BN=str(tile.bn), WN=str(tile.wn),
                 SUB_M=str(tile.bm // tile.wm), SUB_N=str(tile.bn // tile.wn), GRID="\n".join(grid),
                 DECLS="\n".join(decls), LOAD="\n".join(x[4:] for x in a_load + b_load),
                 STORE_FIRST="\n".join(x[4:] for x in a_store + b_store).replace("dst *", "0u *"),
                 LOOP_BODY="\n".join(body), EPILOGUE="\n".join(_epilogue(tile, c_dtype, direct, bias, activation)))
    return src

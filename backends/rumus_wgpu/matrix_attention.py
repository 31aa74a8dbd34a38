"""FlashAttention forward and backward on matrix units (shaders/flash_attention_matrix.wgsl), where
matrix_units.py finds them: float16 q, k, v of head dim 64, no dropout, no bias or key-padding mask (the
causal mask is fine), every row stride, batch / head stride and offset a multiple of 8 elements.
`try_forward` / `try_backward` record the kernels and return True, or return False (nothing recorded) and
flash_attention.py runs the scalar kernels. The backward takes the scalar row pass's lse and D per query
row (its stats buffer), then runs a dK/dV pass (a workgroup per block of 64 keys, over the query blocks
that see them) and a dQ pass (a workgroup per block of 64 queries, over their key blocks): no atomics.

Each kernel's body is written out here, its per-lane loops unrolled (values indexed by constants stay in
registers). In every f32 region a lane owns row `lane / 2` and the columns 2 c + lane % 2.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

from rumus_contracts import TensorArg
from rumus_contracts.ops.attention import default_scale

from . import matrix_units
from .pipelines import render

HEAD_DIMS = (64,)  # wider heads need more workgroup memory than the f32 region leaves
BC = 64  # rows per streamed block (keys in the forward and dQ passes, queries in the dK/dV pass)
SW_PAD = 2  # f32 rows max(BC, D) + 2 words apart: two lanes per row on alternate columns hit 32 banks
NEG_INF_BITS = 0xFF800000
LEFT, RIGHT, RESULT = ("subgroup_matrix_left<f16, 16, 16>", "subgroup_matrix_right<f16, 16, 16>",
                       "subgroup_matrix_result<f32, 16, 16>")
KERNELS = ("forward", "dkdv", "dq")


# eight f16 of one 16-byte load into workgroup array ARR, each element by name (a loop over a local array
# would put the array in slow local memory); one writer per array, since WGSL takes no array pointer of
# another size
_PUT = """fn put_{arr}(i: u32, v: vec4<u32>) {{
    let p0 = bitcast<vec2<f16>>(v.x);
    let p1 = bitcast<vec2<f16>>(v.y);
    let p2 = bitcast<vec2<f16>>(v.z);
    let p3 = bitcast<vec2<f16>>(v.w);
    {arr}_sh[i] = p0.x; {arr}_sh[i + 1u] = p0.y; {arr}_sh[i + 2u] = p1.x; {arr}_sh[i + 3u] = p1.y;
    {arr}_sh[i + 4u] = p2.x; {arr}_sh[i + 5u] = p2.y; {arr}_sh[i + 6u] = p3.x; {arr}_sh[i + 7u] = p3.y;
}}
"""


def shared_bytes(d: int) -> int:
    w = max(BC, d)
    return 2 * BC * (d + 8) * 2 + 64 * (w + SW_PAD) * 4 + 64 * (w + 8) * 2 + 2 * BC * 4


def _stage_rows(name: str, src: str, base: str, stride: str, row0: str, limit: str, d: int) -> list[str]:
    """This subgroup's 16 rows of operand `src` (rows from row0, zeros past limit) into its f16 region,
    then the D / 16 left matrices `name{kk}` from there (a barrier between, and after: the region is reused)."""
    return ["    for (var c = lane; c < 16u * (D / 8u); c += 32u) {",
            "        let rr = c / (D / 8u);",
            "        let col = (c % (D / 8u)) * 8u;",
            f"        let row = {row0} + rr;",
            "        var w = vec4<u32>(0u);",
            f"        if (row < {limit}) {{ w = {src}[({base} + row * {stride} + col) / 8u]; }}",
            "        put_p(preg + rr * PW + col, w);",
            "    }",
            "    workgroupBarrier();",
            *(f"    let {name}{kk} = subgroupMatrixLoad<{LEFT}>(&p_sh, preg + {16 * kk}u, false, PW);"
              for kk in range(d // 16)),
            "    workgroupBarrier();"]


def _load_block(a: tuple[str, str, str], b: tuple[str, str, str], limit: str) -> list[str]:
    """Rows j0 .. j0 + 63 of two operands (binding, base, row stride) into k_sh and v_sh, zeros past limit."""
    return ["        for (var c = lid; c < BC * (D / 8u); c += 128u) {",
            "            let kr = c / (D / 8u);",
            "            let col = (c % (D / 8u)) * 8u;",
            "            let row = j0 + kr;",
            "            var aw = vec4<u32>(0u);",
            "            var bw = vec4<u32>(0u);",
            f"            if (row < {limit}) {{",
            f"                aw = {a[0]}[({a[1]} + row * {a[2]} + col) / 8u];",
            f"                bw = {b[0]}[({b[1]} + row * {b[2]} + col) / 8u];",
            "            }",
            "            put_k(kr * DS + col, aw);",
            "            put_v(kr * DS + col, bw);",
            "        }"]


def _products(out: str, lefts: str, shared: str, d: int, zero: bool = True) -> list[str]:
    """The subgroup's 16 x BC block `lefts` (16 x D, left matrices) times the transpose of the block of
    64 rows in `shared` (BC x D): BC / 16 result matrices, stored into its f32 region."""
    lines = []
    for j in range(BC // 16):
        lines.append(f"        var {out}{j} = {RESULT}();")  # an explicit zero: a bare declaration kept old values
        for kk in range(d // 16):
            lines.append(f"        {out}{j} = subgroupMatrixMultiplyAccumulate({lefts}{kk}, subgroupMatrixLoad<"
                         f"{RIGHT}>(&{shared}, {16 * j}u * DS + {16 * kk}u, true, DS), {out}{j});")
        lines.append(f"        subgroupMatrixStore(&s_sh, sreg + {16 * j}u, {out}{j}, false, SW);")
    return lines


def _accumulate(acc: str, shared: str, d: int) -> list[str]:
    """acc{dt} += (the subgroup's f16 region, 16 x BC) @ (the block in `shared`, BC x D)."""
    lines = [f"        let {acc}_l{kk} = subgroupMatrixLoad<{LEFT}>(&p_sh, preg + {16 * kk}u, false, PW);"
             for kk in range(BC // 16)]
    for dt in range(d // 16):
        for kk in range(BC // 16):
            right = f"subgroupMatrixLoad<{RIGHT}>(&{shared}, {16 * kk}u * DS + {16 * dt}u, false, DS)"
            lines.append(f"        {acc}{dt} = subgroupMatrixMultiplyAccumulate({acc}_l{kk}, {right}, {acc}{dt});")
    return lines


def _store_results(acc: str, out: str, off: str, strides: str, row0: str, limit: str, factor: str,
                   d: int) -> list[str]:
    """The result matrices acc{dt} (the subgroup's 16 rows x D) times `factor` into f16 rows of `out`."""
    lines = [f"    subgroupMatrixStore(&s_sh, sreg + {16 * dt}u, {acc}{dt}, false, SW);" for dt in range(d // 16)]
    lines += ["    workgroupBarrier();",
              f"    {{ let row = {row0} + r;",
              f"      if (row < {limit}) {{",
              f"        let ob = ({off} + b * {strides}.x + h * {strides}.y + row * {strides}.z "
              "+ half * (D / 2u)) / 8u;",
              "        let src = sreg + r * SW + half * (D / 2u);"]
    for w in range(d // 16):
        parts = ", ".join(f"bitcast<u32>(vec2<f16>(f16(s_sh[src + {8 * w + 2 * x}u] * {factor}), "
                          f"f16(s_sh[src + {8 * w + 2 * x + 1}u] * {factor})))" for x in range(4))
        lines.append(f"        {out}[ob + {w}u] = vec4<u32>({parts});")
    return [*lines, "      }", "    }", "    workgroupBarrier();"]


def _prologue(kernel: str) -> list[str]:
    return ["@compute @workgroup_size(128)",
            "fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,",
            "        @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {",
            "    let bh = wid.y;",
            "    let b = bh / cfg.H;",
            "    let h = bh % cfg.H;",
            "    let qb = cfg.q_off + b * cfg.qs.x + h * cfg.qs.y;",
            "    let kb = cfg.k_off + b * cfg.ks.x + h * cfg.ks.y;",
            "    let vb = cfg.v_off + b * cfg.vs.x + h * cfg.vs.y;",
            *(["    let xb = cfg.x_off + b * cfg.xs.x + h * cfg.xs.y;"] if kernel != "forward" else []),
            "    let sreg = sid * 16u * SW;  // this subgroup's f32 region",
            "    let preg = sid * 16u * PW;  // and its f16 region",
            "    let r = lane / 2u;  // the lane's row of the regions",
            "    let half = lane % 2u;",
            "    let sbase = sreg + r * SW + half;",
            "    let pbase = preg + r * PW + half;"]


def _bindings(kernel: str) -> list[str]:
    rw = {"forward": ["out", "lse"], "dkdv": ["dk", "dv"], "dq": ["dq"]}[kernel]
    ro = ["q", "k", "v"] + ([] if kernel == "forward" else ["dout", "stats"])
    lines = []
    for n, name in enumerate(rw + ro):
        kind = "read_write" if name in rw else "read"
        elem = "f16" if name == "lse" else "f32" if name == "stats" else "vec4<u32>"
        lines.append(f"@group(0) @binding({n}) var<storage, {kind}> {name}: array<{elem}>;")
    lines.append(f"@group(0) @binding({len(rw) + len(ro)}) var<uniform> cfg: Config;")
    return lines


def _forward(d: int) -> list[str]:
    half_cols, ov = BC // 2, d // 2
    body = [*_prologue("forward"),
            "    let q0 = wid.x * 64u;",
            *_stage_rows("qa", "q", "qb", "cfg.qs.z", "q0 + sid * 16u", "cfg.L", d),
            "    let i = q0 + sid * 16u + r;",
            "    var m = MASKED;",
            "    var l = 0.0;",
            *(f"    var o{c} = 0.0;" for c in range(ov)),
            "    let kend = select(cfg.S, min(cfg.S, q0 + 64u), cfg.causal != 0u);",
            "    for (var j0 = 0u; j0 < kend; j0 += BC) {",
            "        workgroupBarrier();",
            *_load_block(("k", "kb", "cfg.ks.z"), ("v", "vb", "cfg.vs.z"), "cfg.S"),
            "        workgroupBarrier();",
            *_products("s", "qa", "k_sh", d),
            "        workgroupBarrier();"]
    for c in range(half_cols):  # the lane's scores, scaled and masked, in registers
        body.append(f"        let key{c} = j0 + half + {2 * c}u;")  # (named apart from the loop's j0)
        body.append(f"        let sc{c} = select(s_sh[sbase + {2 * c}u] * cfg.scale, MASKED, "
                    f"key{c} >= cfg.S || (cfg.causal != 0u && key{c} > i));")
    body.append("        var mx = " + _tree("max", [f"sc{c}" for c in range(half_cols)]) + ";")
    body += ["        mx = max(mx, subgroupShuffleXor(mx, 1u));",
             "        let mn = max(m, mx);",
             "        let alpha = exp(m - mn);"]
    for c in range(half_cols):
        body.append(f"        let p{c} = select(0.0, exp(sc{c} - mn), sc{c} > MASKED);")
        body.append(f"        p_sh[pbase + {2 * c}u] = f16(p{c});")
    body += ["        var ps = " + _tree("+", [f"p{c}" for c in range(half_cols)]) + ";",
             "        ps += subgroupShuffleXor(ps, 1u);",
             "        l = l * alpha + ps;",
             "        m = mn;",
             *(f"        o{c} *= alpha;" for c in range(ov)),
             "        workgroupBarrier();",
             *(f"        var pv{dt} = {RESULT}();" for dt in range(d // 16)),
             *_accumulate("pv", "v_sh", d),
             *(f"        subgroupMatrixStore(&s_sh, sreg + {16 * dt}u, pv{dt}, false, SW);" for dt in range(d // 16)),
             "        workgroupBarrier();",
             *(f"        o{c} += s_sh[sbase + {2 * c}u];" for c in range(ov)),
             "    }",
             # the output in f16 through the f16 region (its last readers, the P loads, are past the last
             # barrier); then each lane stores D / 2 contiguous columns of its row with 16-byte writes
             "    let inv = select(0.0, 1.0 / l, l > 0.0);",
             *(f"    p_sh[pbase + {2 * c}u] = f16(o{c} * inv);" for c in range(ov)),
             "    workgroupBarrier();",
             "    if (i < cfg.L) {",
             "        let ob = (cfg.o_off + b * cfg.os.x + h * cfg.os.y + i * cfg.os.z + half * (D / 2u)) / 8u;",
             "        let src = preg + r * PW + half * (D / 2u);"]
    for w in range(d // 16):
        parts = ", ".join(f"bitcast<u32>(vec2<f16>(p_sh[src + {8 * w + 2 * x}u], p_sh[src + {8 * w + 2 * x + 1}u]))"
                          for x in range(4))
        body.append(f"        out[ob + {w}u] = vec4<u32>({parts});")
    body += ["        if (half == 0u) {",
             "            lse[cfg.lse_off + bh * cfg.L + i] = "
             "f16(select(bitcast<f32>(cfg.neg_inf), m + log(l), l > 0.0));",
             "        }",
             "    }",
             "}"]
    return body


def _lanes_probabilities(row_is_key: bool) -> list[str]:
    """p{c} = exp(scale * s - lse) of the lane's BC / 2 entries of the f32 region, 0 where hidden. Rows are
    the subgroup's keys (dK/dV: columns are the block's queries, lse from st_sh) or queries (dQ)."""
    out = []
    for c in range(BC // 2):
        if row_is_key:
            out.append(f"        let query{c} = j0 + half + {2 * c}u;")
            hidden = f"query{c} >= cfg.L || (cfg.causal != 0u && j > query{c})"
            lse = f"st_sh[2u * (half + {2 * c}u)]"
        else:
            out.append(f"        let key{c} = j0 + half + {2 * c}u;")
            hidden = f"key{c} >= cfg.S || (cfg.causal != 0u && key{c} > i)"
            lse = "lse_i"
        out.append(f"        let p{c} = select(exp(s_sh[sbase + {2 * c}u] * cfg.scale - {lse}), 0.0, {hidden});")
    return out


def _lanes_ds(row_is_key: bool) -> list[str]:
    """dS = P (dP - D) of the lane's entries, in f16 into its f16 region."""
    out = []
    for c in range(BC // 2):
        dd = f"st_sh[2u * (half + {2 * c}u) + 1u]" if row_is_key else "d_i"
        out.append(f"        p_sh[pbase + {2 * c}u] = f16(p{c} * (s_sh[sbase + {2 * c}u] - {dd}));")
    return out


def _dkdv(d: int) -> list[str]:
    body = [*_prologue("dkdv"),
            "    let k0 = wid.x * 64u;",
            *_stage_rows("kl", "k", "kb", "cfg.ks.z", "k0 + sid * 16u", "cfg.S", d),
            *_stage_rows("vl", "v", "vb", "cfg.vs.z", "k0 + sid * 16u", "cfg.S", d),
            "    let j = k0 + sid * 16u + r;  // the lane's key",
            *(f"    var dk{dt} = {RESULT}();" for dt in range(d // 16)),
            *(f"    var dv{dt} = {RESULT}();" for dt in range(d // 16)),
            # causal: the first query that sees a key of this block is k0 (block-aligned, as BC = 64)
            "    let first = select(0u, k0, cfg.causal != 0u);",
            "    for (var j0 = first; j0 < cfg.L; j0 += BC) {",
            "        workgroupBarrier();",
            *_load_block(("q", "qb", "cfg.qs.z"), ("dout", "xb", "cfg.xs.z"), "cfg.L"),
            "        if (lid < BC) {",
            "            let row = j0 + lid;",
            "            var st = vec2<f32>(0.0);",
            "            if (row < cfg.L) { st = vec2<f32>(stats[2u * (bh * cfg.L + row)], "
            "stats[2u * (bh * cfg.L + row) + 1u]); }",
            "            st_sh[2u * lid] = st.x;",
            "            st_sh[2u * lid + 1u] = st.y;",
            "        }",
            "        workgroupBarrier();",
            *_products("st", "kl", "k_sh", d),  # S^T: keys x queries
            "        workgroupBarrier();",
            *_lanes_probabilities(row_is_key=True),
            *(f"        p_sh[pbase + {2 * c}u] = f16(p{c});" for c in range(BC // 2)),
            "        workgroupBarrier();",
            *_products("dpt", "vl", "v_sh", d),  # dP^T = V dout^T
            *_accumulate("dv", "v_sh", d),  # dV += P^T dout
            "        workgroupBarrier();",
            *_lanes_ds(row_is_key=True),
            "        workgroupBarrier();",
            *_accumulate("dk", "k_sh", d),  # dK += dS^T Q (scaled at the end)
            "    }",
            "    workgroupBarrier();",
            *_store_results("dv", "dv", "cfg.y_off", "cfg.ys", "k0 + sid * 16u", "cfg.S", "1.0", d),
            *_store_results("dk", "dk", "cfg.o_off", "cfg.os", "k0 + sid * 16u", "cfg.S", "cfg.scale", d),
            "}"]
    return body


def _dq(d: int) -> list[str]:
    body = [*_prologue("dq"),
            "    let q0 = wid.x * 64u;",
            *_stage_rows("ql", "q", "qb", "cfg.qs.z", "q0 + sid * 16u", "cfg.L", d),
            *_stage_rows("dol", "dout", "xb", "cfg.xs.z", "q0 + sid * 16u", "cfg.L", d),
            "    let i = q0 + sid * 16u + r;  // the lane's query",
            "    var lse_i = 0.0;",
            "    var d_i = 0.0;",
            "    if (i < cfg.L) { lse_i = stats[2u * (bh * cfg.L + i)]; d_i = stats[2u * (bh * cfg.L + i) + 1u]; }",
            *(f"    var dq{dt} = {RESULT}();" for dt in range(d // 16)),
            "    let kend = select(cfg.S, min(cfg.S, q0 + 64u), cfg.causal != 0u);",
            "    for (var j0 = 0u; j0 < kend; j0 += BC) {",
            "        workgroupBarrier();",
            *_load_block(("k", "kb", "cfg.ks.z"), ("v", "vb", "cfg.vs.z"), "cfg.S"),
            "        workgroupBarrier();",
            *_products("s", "ql", "k_sh", d),
            "        workgroupBarrier();",
            *_lanes_probabilities(row_is_key=False),
            "        workgroupBarrier();",
            *_products("dp", "dol", "v_sh", d),  # dP = dout V^T
            "        workgroupBarrier();",
            *_lanes_ds(row_is_key=False),
            "        workgroupBarrier();",
            *_accumulate("dq", "k_sh", d),  # dQ += dS K (scaled at the end)
            "    }",
            "    workgroupBarrier();",
            *_store_results("dq", "dq", "cfg.o_off", "cfg.os", "q0 + sid * 16u", "cfg.L", "cfg.scale", d),
            "}"]
    return body


def _tree(op: str, names: list[str]) -> str:
    """A balanced reduction of `names` (short dependency chains)."""
    while len(names) > 1:
        names = [(f"max({a}, {b})" if op == "max" else f"({a} + {b})") for a, b in zip(names[::2], names[1::2])] \
            + names[len(names) // 2 * 2:]
    return names[0]


def generate(d: int, kernel: str = "forward") -> str:
    """The WGSL of one kernel ("forward", "dkdv" or "dq") for head dim `d`."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown attention kernel {kernel!r}; one of {KERNELS}")
    body = {"forward": _forward, "dkdv": _dkdv, "dq": _dq}[kernel](d)
    shared = render("flash_attention_matrix", D=str(d), BC=str(BC), SW=str(max(BC, d) + SW_PAD),
                    PW=str(max(BC, d) + 8), PUTS="\n".join(_PUT.format(arr=a) for a in "kvp"))
    return shared + "\n" + "\n".join([*_bindings(kernel), "", *body]) + "\n"


def _strides(t: TensorArg) -> tuple[int, int, int] | None:
    """(batch, head, row) element strides of a [B, H, rows, D] operand whose rows are contiguous and whose
    every stride and offset is a multiple of 8 (16-byte loads and stores), else None."""
    d = t.shape[3]
    if d > 1 and t.strides[3] != 1:
        return None
    sb, sh, sr = (0 if n == 1 else s for n, s in zip(t.shape[:3], t.strides[:3]))
    if any(s % 8 or s < 0 for s in (sb, sh, sr, t.offset)):
        return None
    return sb, sh, sr


def _eligible(dev: Any, tensors: tuple[TensorArg, ...], bias: TensorArg, key_bias: TensorArg,
              attrs: Mapping[str, Any]) -> list[tuple[int, int, int]] | None:
    """The (batch, head, row) strides of `tensors` when the matrix kernels take this call, else None."""
    q = tensors[0]
    B, H, L, d = q.shape
    if any(t.dtype.name != "float16" for t in tensors) or d not in HEAD_DIMS:
        return None
    if float(attrs["dropout_p"]) > 0.0 or math.prod(bias.shape) > 1 or math.prod(key_bias.shape) > 1:
        return None
    if not matrix_units.available(dev) or shared_bytes(d) > dev.shared_bytes:
        return None
    strides = [_strides(t) for t in tensors]
    rows = max(L, tensors[1].shape[2])
    if any(s is None for s in strides) or rows > dev.max_groups * 64 or B * H > dev.max_groups:
        return None
    return [s for s in strides if s is not None]


def _config(q: TensorArg, S: int, attrs: Mapping[str, Any], offsets: tuple[int, ...],
            strides: list[tuple[int, int, int]]) -> bytes:
    """The Config words: offsets (q, k, v, first output, lse, dout, dv), then six stride vectors."""
    B, H, L, d = q.shape
    words = struct.pack("<4If11I", H, L, S, int(bool(attrs["is_causal"])), default_scale(d, attrs["scale"]),
                        NEG_INF_BITS, *offsets, 0, 0, 0)
    for s in (*strides, *[(0, 0, 0)] * (6 - len(strides))):
        words += struct.pack("<4I", *s, 0)
    return words


def _program(dev: Any, d: int, kernel: str) -> Any:
    return dev.programs.get(("flash_attention_matrix", kernel, d, SW_PAD), lambda: generate(d, kernel))


def try_forward(out: TensorArg, lse: TensorArg, q: TensorArg, k: TensorArg, v: TensorArg, bias: TensorArg,
                key_bias: TensorArg, attrs: Mapping[str, Any], dev: Any) -> bool:
    """Record the forward on matrix units when the call allows it; False: not taken (nothing recorded)."""
    if lse.dtype.name != "float16":
        return False
    strides = _eligible(dev, (q, k, v, out), bias, key_bias, attrs)
    if strides is None:
        return False
    qs, ks, vs, os_ = strides
    B, H, L, d = q.shape
    words = _config(q, k.shape[2], attrs, (q.offset, k.offset, v.offset, out.offset, lse.offset, 0, 0),
                    [qs, ks, vs, os_])
    dev.recorder.dispatch(_program(dev, d, "forward"), [out.buffer, lse.buffer, q.buffer, k.buffer, v.buffer],
                          words, ((L + 63) // 64, B * H, 1))
    return True


def try_backward(dev: Any, dq: TensorArg, dk: TensorArg, dv: TensorArg, q: TensorArg, k: TensorArg, v: TensorArg,
                 dout: TensorArg, stats: Any, bias: TensorArg, key_bias: TensorArg, attrs: Mapping[str, Any]) -> bool:
    """The dK/dV and dQ passes on matrix units, after the row pass wrote `stats`, when the call allows them;
    False: not taken (nothing recorded)."""
    strides = _eligible(dev, (q, k, v, dout, dq, dk, dv), bias, key_bias, attrs)
    if strides is None:
        return False
    qs, ks, vs, xs, dqs, dks, dvs = strides
    B, H, L, d = q.shape
    S = k.shape[2]
    ins = [q.buffer, k.buffer, v.buffer, dout.buffer, stats]
    words = _config(q, S, attrs, (q.offset, k.offset, v.offset, dk.offset, 0, dout.offset, dv.offset),
                    [qs, ks, vs, dks, xs, dvs])
    dev.recorder.dispatch(_program(dev, d, "dkdv"), [dk.buffer, dv.buffer, *ins], words, ((S + 63) // 64, B * H, 1))
    words = _config(q, S, attrs, (q.offset, k.offset, v.offset, dq.offset, 0, dout.offset, 0),
                    [qs, ks, vs, dqs, xs])
    dev.recorder.dispatch(_program(dev, d, "dq"), [dq.buffer, *ins], words, ((L + 63) // 64, B * H, 1))
    return True

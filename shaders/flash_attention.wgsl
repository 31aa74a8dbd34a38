// FlashAttention forward and backward (rumus_contracts/ops/attention.py; the same algorithm as
// csrc/flash_attention.c). Tiled online softmax: a workgroup owns a block of BR query rows (in the dK/dV
// pass, BR key rows) of one (batch, head); the other side streams through workgroup memory in tiles of BK
// rows, so extra memory is O(L) (lse and D = dout . out per row), never [L, S].
//
// Register tiling: an invocation owns RT rows and, of each, the LV vec4s of the head dim that are its
// lane's, LANES = V4 / LV invocations sharing RT rows. The host's plan (flash_attention.py) is one whole
// row per invocation (RT = LANES = 1, LV = V4): 4-row tiles over subgroup lanes measured slower on an
// H200. Causal blocks above the diagonal are never loaded.
//
// DMAX (32, 64 or 128) bounds the head dim: rows are zero-padded to DMAX in registers and tiles, so the
// inner loops have constant trip counts. The host unrolls every `for (var X = 0u; X < N; X++)` loop over
// RT, LV or V4, so per-invocation arrays are indexed by constants only and stay in registers. Masked
// scores are never formed as -inf arithmetic (WGSL need not honour infinities): a score <= -1e30 (a -inf
// bias, a causal or padding position) has probability 0. Dropout is the dropout op's counter-based hash
// (dropout_hash.wgsl, put in front by the host) at element ((b * H + h) * L + i) * S + j (u32 wrap).
alias scalar = f32;

// replaced by the host (flash_attention.py: `plan`)
const DMAX: u32 = 64u;      // the head-dim bucket
const BK: u32 = 32u;        // rows per tile, BK * DMAX = 2048 (16 KiB for two tiles)
const LV: u32 = 4u;         // vec4s of a row per lane
const RT: u32 = 4u;         // rows per invocation (<= 4: per-row values are vec4 components)
const WG: u32 = 64u;        // invocations per workgroup
const HAS_BIAS: bool = true;
const HAS_KBIAS: bool = true;

const V4: u32 = DMAX / 4u;
const LANES: u32 = V4 / LV;
const RL: u32 = RT * LV;    // vec4s per invocation per row array
const BR: u32 = WG / LANES * RT;  // rows per workgroup
const MASKED: f32 = -1.0e30;

struct Config {
    n: u32,                  // rows (the D pass) or unused
    gx: u32,
    B: u32,
    H: u32,
    L: u32,
    S: u32,
    D: u32,
    causal: u32,
    drop: u32,               // 1: dropout on
    scale: f32,
    key: u32,                // mix32(seed ^ 0x9E3779B9)
    thr: u32,                // floor(p * 2^32), saturated
    doff: u32,               // the dropout counter of element 0 (the op's offset attribute)
    inv_keep: f32,           // 1 / (1 - p)
    dv_off: u32,             // the dK/dV pass: dv's element offset (dk's is off[1].z)
    pad1: u32,
    qs: vec4<u32>,           // element strides of q, k, v, dout; bias and key_bias with 0 on broadcast dims
    ks: vec4<u32>,
    vs: vec4<u32>,
    os: vec4<u32>,
    bs: vec4<u32>,
    kbs: vec4<u32>,
    off: array<vec4<u32>, 2>, // element offsets: q, k, v, dout, bias, key_bias, out (or the gradient), lse
}

// keep / (1 - p) for probability element (bh, i, j)
fn drop_factor(bh: u32, i: u32, j: u32) -> f32 {
    let idx = (bh * cfg.L + i) * cfg.S + j;
    return select(0.0, cfg.inv_keep, dropout_keep(cfg.doff + idx, cfg.key, cfg.thr));
}

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

// element e of a tile of BK rows that starts at row `start` of `count` rows: (its row, clamped into range;
// 1 when that row exists, else 0: the tile holds zeros there)
fn tile_row(e: u32, start: u32, count: u32) -> vec2<u32> {
    let t = e / V4;
    return vec2<u32>(min(start + t, count - 1u), u32(start + t < count));
}

fn hsum(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

// The RT rows an invocation owns in a launch of one workgroup per (block of BR rows, batch * head)
struct Rows {
    bh: u32,                 // batch * H + head
    b: u32,
    h: u32,
    lane: u32,               // which LV vec4s of each row
    i: u32,                  // the first row
    iv: vec4<u32>,           // rows i .. i + 3
    live: vec4<bool>,        // the rows that exist: r < RT and below the row count
    b0: f32,                 // the biases that have one element (masks: flat_bias)
}

fn rows_of(place: u32, wid: vec3<u32>, count: u32, b0: f32) -> Rows {
    let i = wid.x * BR + place / LANES * RT;
    let r = vec4<u32>(0u, 1u, 2u, 3u);
    let iv = vec4<u32>(i) + r;
    return Rows(wid.y, wid.y / cfg.H, wid.y % cfg.H, place % LANES, i, iv,
                (iv < vec4<u32>(count)) & (r < vec4<u32>(RT)), b0);
}

// element offset of row r of `me` in an array with element offset `off` and strides `st` ([B, H, rows, D])
fn row_at(off: u32, st: vec4<u32>, me: Rows, r: u32, count: u32) -> u32 {
    return off + me.b * st.x + me.h * st.y + min(me.i + r, count - 1u) * st.z;
}

// the end (exclusive) of the keys that query rows i0 .. i0 + BR see: all of them, or up to the block's
// last row when causal (callers pass i0 = wid.x * BR: uniform, as the barriers in their key loops need)
fn key_end(i0: u32) -> u32 {
    return select(cfg.S, min(cfg.S, i0 + BR), cfg.causal != 0u);
}

// the two tiles a kernel streams through workgroup memory: K and V (forward, dQ) or Q and dOut (dK/dV)
var<workgroup> ta: array<vec4<f32>, 512>;
var<workgroup> tb: array<vec4<f32>, 512>;

// the dot products of the invocation's RT rows `x` with row t of tile ta (or tb), summed over the lanes
fn tile_dots(x: array<vec4<f32>, RL>, t: u32, lane: u32, second: bool) -> vec4<f32> {
    var d4: array<vec4<f32>, RT>;
    for (var c = 0u; c < LV; c++) {
        var y = ta[t * V4 + lane * LV + c];  // one workgroup-memory load for RT rows
        if (second) {
            y = tb[t * V4 + lane * LV + c];
        }
        for (var r = 0u; r < RT; r++) {
            d4[r] += x[r * LV + c] * y;
        }
    }
    var s = vec4<f32>(0.0);
    for (var r = 0u; r < RT; r++) {
        s[r] = hsum(d4[r]);
    }
    return lane_sum(s);
}

fn drop_rows(me: Rows, j: u32) -> vec4<f32> {
    var f = vec4<f32>(1.0);
    if (cfg.drop != 0u) {
        for (var r = 0u; r < RT; r++) {
            f[r] = drop_factor(me.bh, me.i + r, j);
        }
    }
    return f;
}

//// lanes_none
// LANES is 1: an invocation holds whole rows, so a row's dot product needs no sum over lanes.
fn lane_sum(x: vec4<f32>) -> vec4<f32> {
    return x;
}

//// rd
// elements 4c .. 4c + 3 of the row of {{ARR}} at element `base`, zero past the head dim: the host writes
// one copy of this reader per array a kernel reads (rd_q, rd_k, rd_v, rd_dout; {{ARR}}'s strides are
// cfg.{{STRIDES}}), and of rows_{{ARR}}
fn rd_{{ARR}}(base: u32, c: u32) -> vec4<f32> {
    let d = 4u * c;
    let s = cfg.{{STRIDES}}.w;
    let e = cfg.D - 1u;
    return vec4<f32>(select(0.0, ld_{{ARR}}(base + min(d, e) * s), d < cfg.D),
                     select(0.0, ld_{{ARR}}(base + min(d + 1u, e) * s), d + 1u < cfg.D),
                     select(0.0, ld_{{ARR}}(base + min(d + 2u, e) * s), d + 2u < cfg.D),
                     select(0.0, ld_{{ARR}}(base + min(d + 3u, e) * s), d + 3u < cfg.D));
}

// the lane's vec4s of the invocation's RT rows of {{ARR}} (`count` rows per head; element offset off[0].{{OFF}})
fn rows_{{ARR}}(me: Rows, count: u32) -> array<vec4<f32>, RL> {
    var a: array<vec4<f32>, RL>;
    for (var r = 0u; r < RT; r++) {
        let base = row_at(cfg.off[0].{{OFF}}, cfg.{{STRIDES}}, me, r, count);
        for (var c = 0u; c < LV; c++) {
            a[r * LV + c] = rd_{{ARR}}(base, me.lane * LV + c);
        }
    }
    return a;
}

//// wr
// the lane's vec4s of row r of `me` into the contiguous [B * H, count, D] output {{ARR}} at element offset
// `off` (one copy of this writer per output)
fn wr_{{ARR}}(off: u32, me: Rows, r: u32, count: u32, a: array<vec4<f32>, RL>) {
    let o = off + (me.bh * count + me.i + r) * cfg.D;
    for (var c = 0u; c < LV; c++) {
        let d = 4u * (me.lane * LV + c);
        if (d < cfg.D) {
            put4_{{ARR}}(o + d, a[r * LV + c], cfg.D - d);
        }
    }
}

//// kv_tile
// What the forward and dQ kernels share (they declare the tiles ta, tb): the keys a block of query rows
// streams through, a tile at a time.


// the K and V tile of head (b, h): key rows j0 .. j0 + BK into ta and tb, zero past S and D
fn load_kv_tile(lid: u32, b: u32, h: u32, j0: u32) {
    let kb0 = cfg.off[0].y + b * cfg.ks.x + h * cfg.ks.y;
    let vb0 = cfg.off[0].z + b * cfg.vs.x + h * cfg.vs.y;
    for (var e = lid; e < BK * V4; e += WG) {
        let row = tile_row(e, j0, cfg.S);
        ta[e] = select(vec4<f32>(0.0), rd_k(kb0 + row.x * cfg.ks.z, e % V4), row.y != 0u);
        tb[e] = select(vec4<f32>(0.0), rd_v(vb0 + row.x * cfg.vs.z, e % V4), row.y != 0u);
    }
}

//// masks
// What the three attention kernels share that reads bias and kbias (a section of its own: the rowdot
// pass binds neither). A bias with one element (a 0-d zero when there is no mask) is compiled out
// (HAS_BIAS = false) and added once per score from a register instead.

fn flat_bias() -> f32 {
    var c = 0.0;
    if (!HAS_BIAS) {
        c += ld_bias(cfg.off[1].x);
    }
    if (!HAS_KBIAS) {
        c += ld_kbias(cfg.off[1].y);
    }
    return c;
}

// the scores of the invocation's query rows against key j (s: the scaled dot products), MASKED where
// the key is past S, the row does not exist or the causal mask hides it
fn query_scores(s: vec4<f32>, me: Rows, j: u32) -> vec4<f32> {
    let jj = min(j, cfg.S - 1u);
    var sc = s + me.b0;
    if (HAS_KBIAS) {
        sc += ld_kbias(cfg.off[1].y + me.b * cfg.kbs.x + jj * cfg.kbs.y);
    }
    if (HAS_BIAS) {
        let bb = cfg.off[1].x + me.b * cfg.bs.x + me.h * cfg.bs.y + jj * cfg.bs.w;
        for (var r = 0u; r < RT; r++) {
            sc[r] += ld_bias(bb + min(me.i + r, cfg.L - 1u) * cfg.bs.z);
        }
    }
    let jv = vec4<u32>(j);
    let hidden = !me.live | (jv >= vec4<u32>(cfg.S)) | (vec4<bool>(cfg.causal != 0u) & (jv > me.iv));
    return select(sc, vec4<f32>(MASKED), hidden);
}

//// forward
@group(0) @binding(0) var<storage, read_write> out: array<scalar>;
@group(0) @binding(1) var<storage, read_write> lse: array<scalar>;
@group(0) @binding(2) var<storage, read> q: array<scalar>;
@group(0) @binding(3) var<storage, read> k: array<scalar>;
@group(0) @binding(4) var<storage, read> v: array<scalar>;
@group(0) @binding(5) var<storage, read> bias: array<scalar>;
@group(0) @binding(6) var<storage, read> kbias: array<scalar>;
@group(0) @binding(7) var<uniform> cfg: Config;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let me = rows_of(lid, wid, cfg.L, flat_bias());
    let qr = rows_q(me, cfg.L);
    var acc: array<vec4<f32>, RL>;  // zeros
    var m = vec4<f32>(MASKED);
    var l = vec4<f32>(0.0);
    for (var j0 = 0u; j0 < key_end(wid.x * BR); j0 += BK) {
        load_kv_tile(lid, me.b, me.h, j0);
        workgroupBarrier();
        // online softmax one key at a time: the running max only moves up a few times per row, and no
        // per-tile score array is needed (a dynamically indexed array would leave the registers)
        for (var t = 0u; t < BK; t++) {
            let sc = query_scores(tile_dots(qr, t, me.lane, false) * cfg.scale, me, j0 + t);
            let mn = max(m, sc);
            if (any(mn > m)) {
                let alpha = exp(m - mn);
                l *= alpha;
                for (var r = 0u; r < RT; r++) {
                    for (var c = 0u; c < LV; c++) {
                        acc[r * LV + c] *= alpha[r];
                    }
                }
                m = mn;
            }
            let p = select(vec4<f32>(0.0), exp(sc - m), sc > vec4<f32>(MASKED));
            l += p;
            let pd = p * drop_rows(me, j0 + t);
            for (var c = 0u; c < LV; c++) {
                let y = tb[t * V4 + me.lane * LV + c];
                for (var r = 0u; r < RT; r++) {
                    acc[r * LV + c] += pd[r] * y;
                }
            }
        }
        workgroupBarrier();
    }
    let inv = select(vec4<f32>(0.0), 1.0 / l, l > vec4<f32>(0.0));
    for (var r = 0u; r < RT; r++) {
        for (var c = 0u; c < LV; c++) {
            acc[r * LV + c] *= inv[r];
        }
    }
    for (var r = 0u; r < RT; r++) {
        if (me.live[r]) {
            wr_out(cfg.off[1].z, me, r, cfg.L, acc);
            if (me.lane == 0u) {
                put_lse(cfg.off[1].w + me.bh * cfg.L + me.i + r, select(neg_inf(), m[r] + log(l[r]), l[r] > 0.0));
            }
        }
    }
}

//// rowdot
// stats[2 r] = lse[r], stats[2 r + 1] = dout[r] . out[r]: what both backward passes read per query row
// (one item per row of the grid.wgsl launch)
@group(0) @binding(0) var<storage, read_write> stats: array<f32>;
@group(0) @binding(1) var<storage, read> out: array<scalar>;
@group(0) @binding(2) var<storage, read> dout: array<scalar>;
@group(0) @binding(3) var<storage, read> lse: array<scalar>;
@group(0) @binding(4) var<uniform> cfg: Config;

fn run(r: u32) {
    let bh = r / cfg.L;
    let i = r % cfg.L;
    let ob = cfg.off[0].w + (bh / cfg.H) * cfg.os.x + (bh % cfg.H) * cfg.os.y + i * cfg.os.z;
    var s = 0.0;
    for (var d = 0u; d < cfg.D; d++) {
        s += ld_dout(ob + d * cfg.os.w) * ld_out(cfg.off[1].z + r * cfg.D + d);
    }
    stats[2u * r] = ld_lse(cfg.off[1].w + r);
    stats[2u * r + 1u] = s;
}

//// dkdv
// dk and dv of a block of BR key rows (an invocation: RT keys, its lane's part of the head dim) over every
// query that sees them, queries and their dout rows streamed in tiles
@group(0) @binding(0) var<storage, read_write> dk: array<scalar>;
@group(0) @binding(1) var<storage, read_write> dv: array<scalar>;
@group(0) @binding(2) var<storage, read> q: array<scalar>;
@group(0) @binding(3) var<storage, read> k: array<scalar>;
@group(0) @binding(4) var<storage, read> v: array<scalar>;
@group(0) @binding(5) var<storage, read> dout: array<scalar>;
@group(0) @binding(6) var<storage, read> stats: array<f32>;
@group(0) @binding(7) var<storage, read> bias: array<scalar>;
@group(0) @binding(8) var<storage, read> kbias: array<scalar>;
@group(0) @binding(9) var<uniform> cfg: Config;

var<workgroup> st: array<vec2<f32>, BK>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let me = rows_of(lid, wid, cfg.S, flat_bias());
    let kr = rows_k(me, cfg.S);
    let vr = rows_v(me, cfg.S);
    var gk: array<vec4<f32>, RL>;  // zeros
    var gv: array<vec4<f32>, RL>;
    var kbv = vec4<f32>(0.0);
    if (HAS_KBIAS) {
        for (var r = 0u; r < RT; r++) {
            kbv[r] = ld_kbias(cfg.off[1].y + me.b * cfg.kbs.x + min(me.i + r, cfg.S - 1u) * cfg.kbs.y);
        }
    }
    let bb = cfg.off[1].x + me.b * cfg.bs.x + me.h * cfg.bs.y;
    let qb0 = cfg.off[0].x + me.b * cfg.qs.x + me.h * cfg.qs.y;
    let ob0 = cfg.off[0].w + me.b * cfg.os.x + me.h * cfg.os.y;
    let causal = vec4<bool>(cfg.causal != 0u);
    var istart = 0u;
    if (cfg.causal != 0u) {
        istart = wid.x * BR;
    }
    for (var i0 = istart; i0 < cfg.L; i0 += BK) {
        for (var e = lid; e < BK * V4; e += WG) {  // the Q and dOut tile
            let row = tile_row(e, i0, cfg.L);
            ta[e] = select(vec4<f32>(0.0), rd_q(qb0 + row.x * cfg.qs.z, e % V4), row.y != 0u);
            tb[e] = select(vec4<f32>(0.0), rd_dout(ob0 + row.x * cfg.os.z, e % V4), row.y != 0u);
        }
        for (var t = lid; t < BK; t += WG) {
            let r = me.bh * cfg.L + min(i0 + t, cfg.L - 1u);
            st[t] = vec2<f32>(select(MASKED, stats[2u * r], i0 + t < cfg.L), stats[2u * r + 1u]);
        }
        workgroupBarrier();
        for (var t = 0u; t < BK; t++) {
            let i = i0 + t;
            let s = tile_dots(kr, t, me.lane, false) * cfg.scale;
            let dp = tile_dots(vr, t, me.lane, true);
            var sc = s + kbv + me.b0;
            if (HAS_BIAS) {
                let bi = bb + min(i, cfg.L - 1u) * cfg.bs.z;
                for (var r = 0u; r < RT; r++) {
                    sc[r] += ld_bias(bi + min(me.i + r, cfg.S - 1u) * cfg.bs.w);
                }
            }
            let li = st[t].x;
            let hidden = !me.live | (causal & (me.iv > vec4<u32>(i))) | vec4<bool>(li <= MASKED);
            let ok = !hidden & (sc > vec4<f32>(MASKED));
            let p = select(vec4<f32>(0.0), exp(sc - li), ok);
            var f = vec4<f32>(1.0);
            if (cfg.drop != 0u) {
                for (var r = 0u; r < RT; r++) {
                    f[r] = drop_factor(me.bh, i, me.i + r);
                }
            }
            let ds = p * (dp * f - st[t].y) * cfg.scale;
            let pd = p * f;
            for (var c = 0u; c < LV; c++) {
                let x = ta[t * V4 + me.lane * LV + c];
                let y = tb[t * V4 + me.lane * LV + c];
                for (var r = 0u; r < RT; r++) {
                    gk[r * LV + c] += ds[r] * x;
                    gv[r * LV + c] += pd[r] * y;
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < RT; r++) {
        if (me.live[r]) {
            wr_dk(cfg.off[1].z, me, r, cfg.S, gk);
            wr_dv(cfg.dv_off, me, r, cfg.S, gv);
        }
    }
}

//// dq
// dq of a block of BR query rows over every key they see, keys streamed in tiles
@group(0) @binding(0) var<storage, read_write> dq: array<scalar>;
@group(0) @binding(1) var<storage, read> q: array<scalar>;
@group(0) @binding(2) var<storage, read> k: array<scalar>;
@group(0) @binding(3) var<storage, read> v: array<scalar>;
@group(0) @binding(4) var<storage, read> dout: array<scalar>;
@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<scalar>;
@group(0) @binding(7) var<storage, read> kbias: array<scalar>;
@group(0) @binding(8) var<uniform> cfg: Config;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let me = rows_of(lid, wid, cfg.L, flat_bias());
    let qr = rows_q(me, cfg.L);
    let gr = rows_dout(me, cfg.L);
    var gq: array<vec4<f32>, RL>;  // zeros
    var li = vec4<f32>(MASKED);
    var di = vec4<f32>(0.0);
    for (var r = 0u; r < RT; r++) {
        let row = me.bh * cfg.L + min(me.i + r, cfg.L - 1u);
        li[r] = stats[2u * row];
        di[r] = stats[2u * row + 1u];
    }
    li = select(vec4<f32>(MASKED), li, me.live);
    for (var j0 = 0u; j0 < key_end(wid.x * BR); j0 += BK) {
        load_kv_tile(lid, me.b, me.h, j0);
        workgroupBarrier();
        for (var t = 0u; t < BK; t++) {
            let sc = query_scores(tile_dots(qr, t, me.lane, false) * cfg.scale, me, j0 + t);
            let dp = tile_dots(gr, t, me.lane, true);
            let ok = (sc > vec4<f32>(MASKED)) & (li > vec4<f32>(MASKED));
            let p = select(vec4<f32>(0.0), exp(sc - li), ok);
            let ds = p * (dp * drop_rows(me, j0 + t) - di) * cfg.scale;
            for (var c = 0u; c < LV; c++) {
                let y = ta[t * V4 + me.lane * LV + c];
                for (var r = 0u; r < RT; r++) {
                    gq[r * LV + c] += ds[r] * y;
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < RT; r++) {
        if (me.live[r]) {
            wr_dq(cfg.off[1].z, me, r, cfg.L, gq);
        }
    }
}

//// ld
// element i of the read-only float32 / float16 binding {{ARR}} as f32 (the host writes one reader per
// binding the kernel reads: ld_q, ld_bias, ...; bfloat16 words have their own section below)
fn ld_{{ARR}}(i: u32) -> f32 {
    return f32({{ARR}}[i]);
}

//// put
// element i (put) or elements i .. i + min(n, 4) - 1 (put4) of the float32 / float16 output {{ARR}}
fn put_{{ARR}}(i: u32, x: f32) {
    {{ARR}}[i] = scalar(x);
}

fn put4_{{ARR}}(i: u32, x: vec4<f32>, n: u32) {
    {{ARR}}[i] = scalar(x.x);
    if (n > 1u) { {{ARR}}[i + 1u] = scalar(x.y); }
    if (n > 2u) { {{ARR}}[i + 2u] = scalar(x.z); }
    if (n > 3u) { {{ARR}}[i + 3u] = scalar(x.w); }
}

//// ld_bf16
// element i of the read-only bfloat16 binding {{ARR}} (16-bit words, two per u32: bf16.wgsl) as f32
fn ld_{{ARR}}(i: u32) -> f32 {
    return bf16_to_f32(({{ARR}}[i >> 1u] >> ((i & 1u) << 4u)) & 0xffffu);
}

//// put_bf16
// The bfloat16 output {{ARR}} is bound as atomic words: a lone element clears and sets its half (the
// other half may be another invocation's: a neighbouring row's lse, or a row of odd length), while four
// elements starting at an even index are two whole words of this invocation's own, stored plainly.
fn put_{{ARR}}(i: u32, x: f32) {
    let shift = (i & 1u) << 4u;
    atomicAnd(&{{ARR}}[i >> 1u], ~(0xffffu << shift));
    atomicOr(&{{ARR}}[i >> 1u], f32_to_bf16(x) << shift);
}

fn put4_{{ARR}}(i: u32, x: vec4<f32>, n: u32) {
    if ((i & 1u) == 0u && n > 3u) {
        atomicStore(&{{ARR}}[i >> 1u], f32_to_bf16(x.x) | (f32_to_bf16(x.y) << 16u));
        atomicStore(&{{ARR}}[(i >> 1u) + 1u], f32_to_bf16(x.z) | (f32_to_bf16(x.w) << 16u));
        return;
    }
    put_{{ARR}}(i, x.x);
    if (n > 1u) { put_{{ARR}}(i + 1u, x.y); }
    if (n > 2u) { put_{{ARR}}(i + 2u, x.z); }
    if (n > 3u) { put_{{ARR}}(i + 3u, x.w); }
}

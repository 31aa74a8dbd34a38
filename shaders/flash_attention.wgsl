// FlashAttention forward and backward (rumus_contracts/ops/attention.py; the same algorithm as
// csrc/flash_attention.c). Tiled online softmax: a workgroup of WG invocations owns WG query rows (or,
// in the dK/dV pass, WG key rows) of one (batch, head); the other side streams through workgroup memory
// in tiles of BK rows, so extra memory is O(L) (lse and D = dout . out per row), never [L, S].
//
// DMAX (32, 64 or 128) bounds the head dim: rows are zero-padded to DMAX in registers and tiles, so the
// inner loops have constant trip counts; rows are vec4s (V4 = DMAX / 4 of them), so one workgroup-memory
// load feeds four multiply-adds. The host unrolls every `for (var c = 0u; c < V4; c++)` loop, so the
// per-invocation rows are indexed by constants only and stay in registers. Masked scores are never formed as -inf arithmetic (WGSL need not
// honour infinities): a score <= -1e30 (a -inf bias, a causal or padding position) has probability 0.
// Dropout is the dropout op's counter-based hash (dropout_hash.wgsl, put in front by the host) at element
// ((b * H + h) * L + i) * S + j (u32 wrap).
alias scalar = f32;

const DMAX: u32 = 64u;     // replaced by the host: the head-dim bucket
const BK: u32 = 32u;       // replaced by the host: rows per tile, BK * DMAX = 2048 (16 KiB for two tiles)
const V4: u32 = DMAX / 4u;
const WG: u32 = 64u;
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
    pad0: u32,
    pad1: u32,
    qs: vec4<u32>,           // element strides of q, k, v, dout; bias and key_bias with 0 on broadcast dims
    ks: vec4<u32>,
    vs: vec4<u32>,
    os: vec4<u32>,
    bs: vec4<u32>,
    kbs: vec4<u32>,
    off: array<vec4<u32>, 2>, // element offsets: q, k, v, dout, bias, key_bias, out, lse
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

//// rd
// elements 4c .. 4c + 3 of the row of {{ARR}} at element `base`, zero past the head dim: the host writes
// one copy of this reader per array a kernel reads (rd_q, rd_k, rd_v, rd_dout; {{ARR}}'s strides are
// cfg.{{STRIDES}})
fn rd_{{ARR}}(base: u32, c: u32) -> vec4<f32> {
    let d = 4u * c;
    let s = cfg.{{STRIDES}}.w;
    let e = cfg.D - 1u;
    return vec4<f32>(select(0.0, f32({{ARR}}[base + min(d, e) * s]), d < cfg.D),
                     select(0.0, f32({{ARR}}[base + min(d + 1u, e) * s]), d + 1u < cfg.D),
                     select(0.0, f32({{ARR}}[base + min(d + 2u, e) * s]), d + 2u < cfg.D),
                     select(0.0, f32({{ARR}}[base + min(d + 3u, e) * s]), d + 3u < cfg.D));
}

//// kv_tile
// What the forward and dQ kernels share (they bind k and v and declare the tiles kt, vt): the keys a
// block of query rows streams through, a tile at a time.

var<workgroup> kt: array<vec4<f32>, 512>;
var<workgroup> vt: array<vec4<f32>, 512>;

// The query row this invocation owns in a launch of one workgroup per (block of WG query rows, batch * head)
struct QueryRow {
    bh: u32,                // batch * H + head
    b: u32,
    h: u32,
    i: u32,                 // this invocation's row (past L in the last block: not live)
    ii: u32,                // i clamped into range, for reads
}

fn query_row(lid: u32, wid: vec3<u32>) -> QueryRow {
    let i = wid.x * WG + lid;
    return QueryRow(wid.y, wid.y / cfg.H, wid.y % cfg.H, i, min(i, cfg.L - 1u));
}

// the end (exclusive) of the keys that query rows i0 .. i0 + WG see: all of them, or up to the block's
// last row when causal (callers pass i0 = wid.x * WG: uniform, as the barriers in their key loops need)
fn key_end(i0: u32) -> u32 {
    return select(cfg.S, min(cfg.S, i0 + WG), cfg.causal != 0u);
}

// the K and V tile of head (b, h): key rows j0 .. j0 + BK into kt and vt, zero past S and D
fn load_kv_tile(lid: u32, b: u32, h: u32, j0: u32) {
    let kb0 = cfg.off[0].y + b * cfg.ks.x + h * cfg.ks.y;
    let vb0 = cfg.off[0].z + b * cfg.vs.x + h * cfg.vs.y;
    for (var e = lid; e < BK * V4; e += WG) {
        let row = tile_row(e, j0, cfg.S);
        kt[e] = select(vec4<f32>(0.0), rd_k(kb0 + row.x * cfg.ks.z, e % V4), row.y != 0u);
        vt[e] = select(vec4<f32>(0.0), rd_v(vb0 + row.x * cfg.vs.z, e % V4), row.y != 0u);
    }
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

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let me = query_row(lid, wid);
    let live = me.i < cfg.L;
    var qr: array<vec4<f32>, V4>;
    var acc: array<vec4<f32>, V4>;
    let qb = cfg.off[0].x + me.b * cfg.qs.x + me.h * cfg.qs.y + me.ii * cfg.qs.z;
    for (var c = 0u; c < V4; c++) {
        qr[c] = rd_q(qb, c) * cfg.scale;
        acc[c] = vec4<f32>(0.0);
    }
    var m = MASKED;
    var l = 0.0;
    let bb = cfg.off[1].x + me.b * cfg.bs.x + me.h * cfg.bs.y + me.ii * cfg.bs.z;
    let kbb = cfg.off[1].y + me.b * cfg.kbs.x;
    for (var j0 = 0u; j0 < key_end(wid.x * WG); j0 += BK) {
        load_kv_tile(lid, me.b, me.h, j0);
        workgroupBarrier();
        // online softmax one key at a time: the running max only moves up a few times per row, and no
        // per-tile score array is needed (a dynamically indexed array would leave the registers)
        for (var t = 0u; t < BK; t++) {
            let j = j0 + t;
            var dot = vec4<f32>(0.0);
            for (var c = 0u; c < V4; c++) {
                dot += qr[c] * kt[t * V4 + c];
            }
            let jj = min(j, cfg.S - 1u);
            let sc = hsum(dot) + f32(bias[bb + jj * cfg.bs.w]) + f32(kbias[kbb + jj * cfg.kbs.y]);
            let ok = live && j < cfg.S && !(cfg.causal != 0u && j > me.i) && sc > MASKED;
            if (ok && sc > m) {
                let alpha = exp(m - sc);
                l *= alpha;
                for (var c = 0u; c < V4; c++) {
                    acc[c] *= alpha;
                }
                m = sc;
            }
            var p = select(0.0, exp(sc - m), ok);
            l += p;
            if (cfg.drop != 0u) {
                p *= drop_factor(me.bh, me.i, j);
            }
            for (var c = 0u; c < V4; c++) {
                acc[c] += p * vt[t * V4 + c];
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let row = me.bh * cfg.L + me.i;
        let inv = select(0.0, 1.0 / l, l > 0.0);
        let o = cfg.off[1].z + row * cfg.D;
        for (var c = 0u; c < V4; c++) {
            let a = acc[c] * inv;
            if (4u * c < cfg.D) { out[o + 4u * c] = scalar(a.x); }
            if (4u * c + 1u < cfg.D) { out[o + 4u * c + 1u] = scalar(a.y); }
            if (4u * c + 2u < cfg.D) { out[o + 4u * c + 2u] = scalar(a.z); }
            if (4u * c + 3u < cfg.D) { out[o + 4u * c + 3u] = scalar(a.w); }
        }
        lse[cfg.off[1].w + row] = scalar(select(neg_inf(), m + log(l), l > 0.0));
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
        s += f32(dout[ob + d * cfg.os.w]) * f32(out[cfg.off[1].z + r * cfg.D + d]);
    }
    stats[2u * r] = f32(lse[cfg.off[1].w + r]);
    stats[2u * r + 1u] = s;
}

//// dkdv
// one invocation per key row j: dk[j] (WANT_DK) or dv[j] over every query that sees j, queries streamed in
// tiles. Two dispatches of this kernel, not one computing both: the compiler drops what the other gradient
// needs, so a row of k, v and two accumulators (4 x DMAX floats) never has to fit in registers at once.
const WANT_DK: bool = true;  // replaced by the host
@group(0) @binding(0) var<storage, read_write> grad: array<scalar>;
@group(0) @binding(1) var<storage, read> q: array<scalar>;
@group(0) @binding(2) var<storage, read> k: array<scalar>;
@group(0) @binding(3) var<storage, read> v: array<scalar>;
@group(0) @binding(4) var<storage, read> dout: array<scalar>;
@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<scalar>;
@group(0) @binding(7) var<storage, read> kbias: array<scalar>;
@group(0) @binding(8) var<uniform> cfg: Config;

var<workgroup> qt: array<vec4<f32>, 512>;
var<workgroup> ot: array<vec4<f32>, 512>;
var<workgroup> st: array<vec2<f32>, BK>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let bh = wid.y;
    let b = bh / cfg.H;
    let h = bh % cfg.H;
    let j0 = wid.x * WG;
    let j = j0 + lid;
    let live = j < cfg.S;
    let jj = min(j, cfg.S - 1u);
    var kr: array<vec4<f32>, V4>;
    var vr: array<vec4<f32>, V4>;
    var gk: array<vec4<f32>, V4>;
    var gv: array<vec4<f32>, V4>;
    let kb0 = cfg.off[0].y + b * cfg.ks.x + h * cfg.ks.y + jj * cfg.ks.z;
    let vb0 = cfg.off[0].z + b * cfg.vs.x + h * cfg.vs.y + jj * cfg.vs.z;
    for (var c = 0u; c < V4; c++) {
        kr[c] = rd_k(kb0, c) * cfg.scale;
        vr[c] = rd_v(vb0, c);
        gk[c] = vec4<f32>(0.0);
        gv[c] = vec4<f32>(0.0);
    }
    let bb = cfg.off[1].x + b * cfg.bs.x + h * cfg.bs.y + jj * cfg.bs.w;
    let kbv = f32(kbias[cfg.off[1].y + b * cfg.kbs.x + jj * cfg.kbs.y]);
    let qb0 = cfg.off[0].x + b * cfg.qs.x + h * cfg.qs.y;
    let ob0 = cfg.off[0].w + b * cfg.os.x + h * cfg.os.y;
    var istart = 0u;
    if (cfg.causal != 0u) {
        istart = j0;
    }
    for (var i0 = istart; i0 < cfg.L; i0 += BK) {
        for (var e = lid; e < BK * V4; e += WG) {  // the Q and dOut tile
            let row = tile_row(e, i0, cfg.L);
            qt[e] = select(vec4<f32>(0.0), rd_q(qb0 + row.x * cfg.qs.z, e % V4), row.y != 0u);
            ot[e] = select(vec4<f32>(0.0), rd_dout(ob0 + row.x * cfg.os.z, e % V4), row.y != 0u);
        }
        for (var t = lid; t < BK; t += WG) {
            let r = bh * cfg.L + min(i0 + t, cfg.L - 1u);
            st[t] = vec2<f32>(select(MASKED, stats[2u * r], i0 + t < cfg.L), stats[2u * r + 1u]);
        }
        workgroupBarrier();
        for (var t = 0u; t < BK; t++) {
            let i = i0 + t;
            var dot = vec4<f32>(0.0);
            var dp4 = vec4<f32>(0.0);
            for (var c = 0u; c < V4; c++) {
                dot += qt[t * V4 + c] * kr[c];
                dp4 += ot[t * V4 + c] * vr[c];
            }
            let ii = min(i, cfg.L - 1u);
            let sc = hsum(dot) + f32(bias[bb + ii * cfg.bs.z]) + kbv;
            let li = st[t].x;
            let ok = live && i < cfg.L && !(cfg.causal != 0u && j > i) && sc > MASKED && li > MASKED;
            let p = select(0.0, exp(sc - li), ok);
            var f = 1.0;
            if (cfg.drop != 0u) {
                f = drop_factor(bh, i, j);
            }
            let ds = p * (hsum(dp4) * f - st[t].y) * cfg.scale;
            let pd = p * f;
            for (var c = 0u; c < V4; c++) {
                gk[c] += ds * qt[t * V4 + c];
                gv[c] += pd * ot[t * V4 + c];
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let o = cfg.off[1].z + (bh * cfg.S + j) * cfg.D;
        for (var c = 0u; c < V4; c++) {
            var a = gv[c];  // a constant branch, not select(): select would keep both accumulators alive
            if (WANT_DK) {
                a = gk[c];
            }
            if (4u * c < cfg.D) { grad[o + 4u * c] = scalar(a.x); }
            if (4u * c + 1u < cfg.D) { grad[o + 4u * c + 1u] = scalar(a.y); }
            if (4u * c + 2u < cfg.D) { grad[o + 4u * c + 2u] = scalar(a.z); }
            if (4u * c + 3u < cfg.D) { grad[o + 4u * c + 3u] = scalar(a.w); }
        }
    }
}

//// dq
// one invocation per query row i: dq[i] over every key it sees, keys streamed in tiles
@group(0) @binding(0) var<storage, read_write> dq: array<scalar>;
@group(0) @binding(1) var<storage, read> q: array<scalar>;
@group(0) @binding(2) var<storage, read> k: array<scalar>;
@group(0) @binding(3) var<storage, read> v: array<scalar>;
@group(0) @binding(4) var<storage, read> dout: array<scalar>;
@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<scalar>;
@group(0) @binding(7) var<storage, read> kbias: array<scalar>;
@group(0) @binding(8) var<uniform> cfg: Config;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let me = query_row(lid, wid);
    let live = me.i < cfg.L;
    var qr: array<vec4<f32>, V4>;
    var gr: array<vec4<f32>, V4>;
    var gq: array<vec4<f32>, V4>;
    let qb = cfg.off[0].x + me.b * cfg.qs.x + me.h * cfg.qs.y + me.ii * cfg.qs.z;
    let ob = cfg.off[0].w + me.b * cfg.os.x + me.h * cfg.os.y + me.ii * cfg.os.z;
    for (var c = 0u; c < V4; c++) {
        qr[c] = rd_q(qb, c) * cfg.scale;
        gr[c] = rd_dout(ob, c);
        gq[c] = vec4<f32>(0.0);
    }
    let r = me.bh * cfg.L + me.ii;
    let li = stats[2u * r];
    let di = stats[2u * r + 1u];
    let bb = cfg.off[1].x + me.b * cfg.bs.x + me.h * cfg.bs.y + me.ii * cfg.bs.z;
    let kbb = cfg.off[1].y + me.b * cfg.kbs.x;
    for (var j0 = 0u; j0 < key_end(wid.x * WG); j0 += BK) {
        load_kv_tile(lid, me.b, me.h, j0);
        workgroupBarrier();
        for (var t = 0u; t < BK; t++) {
            let j = j0 + t;
            var dot = vec4<f32>(0.0);
            var dp4 = vec4<f32>(0.0);
            for (var c = 0u; c < V4; c++) {
                dot += qr[c] * kt[t * V4 + c];
                dp4 += gr[c] * vt[t * V4 + c];
            }
            let jj = min(j, cfg.S - 1u);
            let sc = hsum(dot) + f32(bias[bb + jj * cfg.bs.w]) + f32(kbias[kbb + jj * cfg.kbs.y]);
            let ok = live && j < cfg.S && !(cfg.causal != 0u && j > me.i) && sc > MASKED && li > MASKED;
            let p = select(0.0, exp(sc - li), ok);
            var f = 1.0;
            if (cfg.drop != 0u) {
                f = drop_factor(me.bh, me.i, j);
            }
            let ds = p * (hsum(dp4) * f - di) * cfg.scale;
            for (var c = 0u; c < V4; c++) {
                gq[c] += ds * kt[t * V4 + c];
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let o = cfg.off[1].z + (me.bh * cfg.L + me.i) * cfg.D;
        for (var c = 0u; c < V4; c++) {
            let a = gq[c];
            if (4u * c < cfg.D) { dq[o + 4u * c] = scalar(a.x); }
            if (4u * c + 1u < cfg.D) { dq[o + 4u * c + 1u] = scalar(a.y); }
            if (4u * c + 2u < cfg.D) { dq[o + 4u * c + 2u] = scalar(a.z); }
            if (4u * c + 3u < cfg.D) { dq[o + 4u * c + 3u] = scalar(a.w); }
        }
    }
}

// Quantized weights (rumus_contracts/ops/quant.py; SPEC C q8 blocks, SPEC D int4 groups), float32 only.
// Every kernel reads the packed u32 words directly and dequantises in registers: no float copy of the
// weight is ever made. q8 words: column-major blocks of (1 header + bs/4 value words), the header's
// low 16 bits the f16 scale, byte j of a value word element 4w + j (signed). int4 words: K-major,
// word (k / 8) * n + c, nibble k % 8. Words may be a strided 1-D view: w_off / w_st.
alias scalar = f32;

struct Config {
    n: u32,                 // items: output elements, or (q8_linear) output elements as workgroups
    gx: u32,
    k: u32,
    cols: u32,              // the output's columns (the weight's n)
    size: u32,              // q8 block size or int4 group size
    w_off: u32,
    w_st: u32,
    x_off: u32,             // x: contiguous [m, k] from x_off
    s_off: u32,             // int4 scales / zero points: contiguous [groups, n]
    z_off: u32,
    o_off: u32,
}

fn q8_byte(word: u32, e: u32) -> f32 {
    return f32(extractBits(bitcast<i32>(word), 8u * e, 8u));  // sign-extending
}

//// q8_bind
@group(0) @binding(0) var<storage, read_write> outv: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn word(i: u32) -> u32 { return w[cfg.w_off + i * cfg.w_st]; }

//// q8_dequantize
// item i: output element [k, n], row-major (quant.py puts grid.wgsl, the launch, in front)
fn run(i: u32) {
    let r = i / cfg.cols;
    let c = i % cfg.cols;
    let nb = (cfg.k + cfg.size - 1u) / cfg.size;
    let bw = 1u + cfg.size / 4u;
    let blk = (c * nb + r / cfg.size) * bw;
    let j = r % cfg.size;
    let scale = unpack2x16float(word(blk) & 0xFFFFu).x;
    outv[cfg.o_off + i] = q8_byte(word(blk + 1u + j / 4u), j % 4u) * scale;
}

//// int4_bind
@group(0) @binding(0) var<storage, read_write> outv: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> sc: array<f32>;
@group(0) @binding(3) var<storage, read> zp: array<f32>;

fn word(i: u32) -> u32 { return w[cfg.w_off + i * cfg.w_st]; }

//// int4_cfg_4
@group(0) @binding(4) var<uniform> cfg: Config;

//// int4_dequantize
// item i: output element [k, n], row-major (quant.py puts grid.wgsl, the launch, in front)
fn run(i: u32) {
    let r = i / cfg.cols;
    let c = i % cfg.cols;
    let q = f32((word((r / 8u) * cfg.cols + c) >> (4u * (r % 8u))) & 0xFu);
    let g = (r / cfg.size) * cfg.cols + c;
    outv[cfg.o_off + i] = (q - zp[cfg.z_off + g]) * sc[cfg.s_off + g];
}

//// gemv_cfg
// the matmuls' uniform (quant.py _gemv_cfg): tiles of columns and rows, K split into chunks
struct Gemv {
    groups: u32,   // workgroups in all
    gx: u32,       // workgroups per grid row
    m: u32,
    k: u32,
    cols: u32,
    size: u32,     // q8 block / int4 group size
    shift: u32,    // log2(size / 4): q8 value words per block; int4 group of k is k >> (shift + 2)
    w_off: u32,
    w_st: u32,
    x_off: u32,
    s_off: u32,
    z_off: u32,
    o_off: u32,
    col_tiles: u32,
    k_chunks: u32,
    chunk_rows: u32,  // int4: word rows per K chunk
}

//// q8_gemv
// A workgroup: 4 columns x up to 4 rows of x. 64 invocations per column walk its value words side by
// side (coalesced: a column's blocks are contiguous), dequantise 4 int8 in registers, multiply by up
// to 4 rows of x, and a tree over the 64 folds each (row, column). q8 columns are long and contiguous,
// so one column per 64 invocations already gives N / 4 workgroups (1024 for N = 4096).
@group(0) @binding(0) var<storage, read_write> outv: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<uniform> cfg: Gemv;

fn word(i: u32) -> u32 { return w[cfg.w_off + i * cfg.w_st]; }

fn xat(r: u32, k: u32) -> f32 { return select(0.0, x[cfg.x_off + r * cfg.k + min(k, cfg.k - 1u)], k < cfg.k); }

var<workgroup> part: array<vec4<f32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let item = wid.y * cfg.gx + wid.x;
    if (item >= cfg.groups) { return; }  // uniform per workgroup: barriers stay in uniform control flow
    let c = (item % cfg.col_tiles) * 4u + lid / 64u;
    let r0 = (item / cfg.col_tiles) * 4u;
    let lane = lid % 64u;
    let per = cfg.size / 4u;
    let nb = (cfg.k + cfg.size - 1u) / cfg.size;
    let bw = 1u + per;
    let rows = min(4u, cfg.m - r0);
    var acc = vec4<f32>(0.0);
    if (c < cfg.cols) {
        let col = c * nb * bw;
        for (var v = lane; v < nb * per; v += 64u) {
            let b = v >> cfg.shift;
            let j = v & (per - 1u);
            let scale = unpack2x16float(word(col + b * bw) & 0xFFFFu).x;
            let qw = bitcast<i32>(word(col + b * bw + 1u + j));
            // the 4 signed bytes, scaled in registers
            let q = vec4<f32>(vec4<i32>(extractBits(qw, 0u, 8u), extractBits(qw, 8u, 8u), extractBits(qw, 16u, 8u),
                                        extractBits(qw, 24u, 8u))) * scale;
            let k0 = b * cfg.size + j * 4u;
            for (var rr = 0u; rr < 4u; rr++) {
                if (rr < rows) {
                    let r = r0 + rr;
                    var xv: vec4<f32>;
                    if (k0 + 3u < cfg.k) {
                        let base = cfg.x_off + r * cfg.k + k0;
                        xv = vec4<f32>(x[base], x[base + 1u], x[base + 2u], x[base + 3u]);
                    } else {  // the padding of the last block: its codes are 0, but x may not be read there
                        xv = vec4<f32>(xat(r, k0), xat(r, k0 + 1u), xat(r, k0 + 2u), xat(r, k0 + 3u));
                    }
                    acc[rr] += dot(xv, q);
                }
            }
        }
    }
    part[lid] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lane < s) { part[lid] += part[lid + s]; }
        workgroupBarrier();
    }
    if (lane == 0u && c < cfg.cols) {
        for (var rr = 0u; rr < rows; rr++) { outv[cfg.o_off + (r0 + rr) * cfg.cols + c] = part[lid][rr]; }
    }
}

//// int4_gemv
// Pass 1 of 2. A workgroup: 64 columns x up to 4 rows x one chunk of K (cfg.chunk_rows word rows).
// Invocation (slice, column) walks the chunk's word rows slice, slice + 4, ...: each load across
// neighbouring invocations reads neighbouring words of one K-major row (coalesced); the 8 nibbles are
// dequantised in registers, (q - zp) * scale as sum(x q) - zp sum(x), as the C kernel does. The chunk
// of x sits in workgroup memory. K is split over workgroups so N = 4096 still makes >= 1024 of them;
// the 4 slices fold in workgroup memory and each chunk's partial sum goes to `partial`, which
// int4_gemv_sum adds up in chunk order (deterministic, no atomics).
@group(0) @binding(0) var<storage, read_write> partial: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> sc: array<f32>;
@group(0) @binding(3) var<storage, read> zp: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<uniform> cfg: Gemv;

const XCHUNK: u32 = 512u;  // floats of x per row held in workgroup memory (64 word rows)
var<workgroup> xs: array<f32, 2048>;  // 4 rows x XCHUNK
var<workgroup> fold: array<vec4<f32>, 256>;

fn word(i: u32) -> u32 { return w[cfg.w_off + i * cfg.w_st]; }

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let item = wid.y * cfg.gx + wid.x;
    if (item >= cfg.groups) { return; }  // uniform per workgroup
    let ct = item % cfg.col_tiles;
    let kc = (item / cfg.col_tiles) % cfg.k_chunks;
    let r0 = (item / (cfg.col_tiles * cfg.k_chunks)) * 4u;
    let rows = min(4u, cfg.m - r0);
    let c = ct * 64u + lid % 64u;
    let slice = lid / 64u;
    let wr0 = kc * cfg.chunk_rows;
    let wr1 = min(wr0 + cfg.chunk_rows, (cfg.k + 7u) / 8u);
    var acc = vec4<f32>(0.0);
    for (var base = wr0 * 8u; base < wr1 * 8u; base += XCHUNK) {
        let span = min(XCHUNK, wr1 * 8u - base);
        workgroupBarrier();
        for (var t = lid; t < 4u * XCHUNK; t += 256u) {
            let rr = t / XCHUNK;
            let kk = base + t % XCHUNK;
            xs[t] = select(0.0, x[cfg.x_off + (r0 + rr) * cfg.k + min(kk, cfg.k - 1u)], rr < rows && kk < cfg.k && t % XCHUNK < span);
        }
        workgroupBarrier();
        if (c < cfg.cols) {
            for (var wr = base / 8u + slice; wr < (base + span) / 8u; wr += 4u) {
                let qw = word(wr * cfg.cols + c);
                let q = vec4<f32>(vec4<u32>(qw, qw >> 4u, qw >> 8u, qw >> 12u) & vec4<u32>(0xFu));
                let q2 = vec4<f32>(vec4<u32>(qw >> 16u, qw >> 20u, qw >> 24u, qw >> 28u) & vec4<u32>(0xFu));
                let gi = ((wr * 8u) >> (cfg.shift + 2u)) * cfg.cols + c;  // group: k / size, size = 4 << shift
                let s = sc[cfg.s_off + gi];
                let z = zp[cfg.z_off + gi];
                let at = wr * 8u - base;
                for (var rr = 0u; rr < rows; rr++) {  // rows is uniform: batch 1 does one row's work
                    let xa = vec4<f32>(xs[rr * XCHUNK + at], xs[rr * XCHUNK + at + 1u], xs[rr * XCHUNK + at + 2u],
                                       xs[rr * XCHUNK + at + 3u]);
                    let xb = vec4<f32>(xs[rr * XCHUNK + at + 4u], xs[rr * XCHUNK + at + 5u], xs[rr * XCHUNK + at + 6u],
                                       xs[rr * XCHUNK + at + 7u]);
                    let one = vec4<f32>(1.0);
                    acc[rr] += s * ((dot(xa, q) + dot(xb, q2)) - z * (dot(xa, one) + dot(xb, one)));
                }
            }
        }
    }
    fold[lid] = acc;
    workgroupBarrier();
    if (slice == 0u && c < cfg.cols) {
        let total = fold[lid] + fold[lid + 64u] + fold[lid + 128u] + fold[lid + 192u];
        for (var rr = 0u; rr < rows; rr++) {
            partial[(kc * cfg.m + r0 + rr) * cfg.cols + c] = total[rr];
        }
    }
}

//// int4_gemv_sum
// Pass 2: out[r, c] = the chunks' partial sums, in chunk order (quant.py puts grid.wgsl in front).
@group(0) @binding(0) var<storage, read_write> outv: array<f32>;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    var total = 0.0;
    for (var kc = 0u; kc < cfg.size; kc++) { total += partial[kc * cfg.n + i]; }
    outv[cfg.o_off + i] = total;
}

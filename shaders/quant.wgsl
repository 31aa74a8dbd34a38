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

//// x_bind
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<uniform> cfg: Config;

//// q8_bind_linear
@group(0) @binding(0) var<storage, read_write> outv: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;

fn word(i: u32) -> u32 { return w[cfg.w_off + i * cfg.w_st]; }

//// q8_linear
// One workgroup per output (row, column): the 64 threads walk the column's value words side by side
// (coalesced), each dequantising 4 int8 values in registers, then a tree reduction.
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let item = wid.y * cfg.gx + wid.x;
    if (item >= cfg.n) { return; }  // uniform per workgroup: barriers stay in uniform control flow
    let r = item / cfg.cols;
    let c = item % cfg.cols;
    let per = cfg.size / 4u;
    let nb = (cfg.k + cfg.size - 1u) / cfg.size;
    let bw = 1u + per;
    let col = c * nb * bw;
    var acc = 0.0;
    for (var v = lid; v < nb * per; v += 64u) {
        let b = v / per;
        let k0 = b * cfg.size + (v % per) * 4u;
        let scale = unpack2x16float(word(col + b * bw) & 0xFFFFu).x;
        let qw = word(col + b * bw + 1u + v % per);
        var dsum = 0.0;
        for (var e = 0u; e < 4u; e++) {
            if (k0 + e < cfg.k) { dsum += x[cfg.x_off + r * cfg.k + k0 + e] * q8_byte(qw, e); }
        }
        acc += dsum * scale;
    }
    part[lid] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) { part[lid] += part[lid + s]; }
        workgroupBarrier();
    }
    if (lid == 0u) { outv[cfg.o_off + r * cfg.cols + c] = part[0]; }
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

//// int4_x_5
@group(0) @binding(4) var<storage, read> x: array<f32>;
@group(0) @binding(5) var<uniform> cfg: Config;

//// int4_linear
// One thread per output (row, column): neighbouring threads read neighbouring words of a K-major row
// (coalesced); per group sum x*q, then scale * (sum - zp * sum x), as the C kernel does.
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.y * cfg.gx + wid.x) * 64u + lid;
    if (i >= cfg.n) { return; }
    let r = i / cfg.cols;
    let c = i % cfg.cols;
    let groups = (cfg.k + cfg.size - 1u) / cfg.size;
    let xrow = cfg.x_off + r * cfg.k;
    var acc = 0.0;
    for (var g = 0u; g < groups; g++) {
        var dsum = 0.0;
        var xs = 0.0;
        let k1 = min(cfg.k, (g + 1u) * cfg.size);
        for (var k8 = g * cfg.size; k8 < k1; k8 += 8u) {
            let qw = word((k8 / 8u) * cfg.cols + c);
            for (var e = 0u; e < 8u; e++) {
                if (k8 + e < k1) {
                    let xv = x[xrow + k8 + e];
                    dsum += xv * f32((qw >> (4u * e)) & 0xFu);
                    xs += xv;
                }
            }
        }
        let gi = g * cfg.cols + c;
        acc += sc[cfg.s_off + gi] * (dsum - zp[cfg.z_off + gi] * xs);
    }
    outv[cfg.o_off + r * cfg.cols + c] = acc;
}

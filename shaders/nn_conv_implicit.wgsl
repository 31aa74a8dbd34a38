// conv2d forward as an implicit GEMM for small weights: y[s, grp * og + o, oh, ow] =
//   sum_k w[grp * og + o, k] * x[s, grp * cg + c, oh * sh - ph + i * dh, ow * sw - pw + j * dw]
// over kernel entries k = (c * kh + i) * kw + j. The im2col column is gathered tile by tile into
// workgroup memory, never written out, and y is written in NCHW directly (no reorder copy).
// Workgroup (tile, grp): 16 output channels x 64 positions r = (sample, oh, ow); 64 invocations of
// 4 x 4 outputs: channels o0 + 4 * ty + a, positions p0 + tx + 16 * b (consecutive tx: consecutive
// positions, so loads and stores coalesce). nn_conv_implicit.py packs the uniform.
alias scalar = f32;

struct Config {
    c: u32,
    h: i32,
    w: i32,
    kh: i32,
    kw: i32,
    sh: i32,
    sw: i32,
    ph: i32,
    pw: i32,
    dh: i32,
    dw: i32,
    ho: i32,
    wo: i32,
    o: u32,                 // output channels, all groups
    og: u32,                // output channels per group
    cg: u32,                // input channels per group
    kg: u32,                // cg * kh * kw
    rows: u32,              // samples * ho * wo
    tiles_p: u32,           // 64-wide tiles along rows
    g0: u32,                // first group of this launch
    x_off: u32,
    w_off: u32,
    y_off: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<storage, read> wt: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

var<workgroup> tw: array<f32, 272>;     // [16 channels][16 entries], rows padded to 17
var<workgroup> tx_: array<f32, 1024>;   // [16 entries][64 positions]

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    let p0 = (wid.x % cfg.tiles_p) * 64u;
    let o0 = (wid.x / cfg.tiles_p) * 16u;
    let grp = cfg.g0 + wid.y;
    let plane = u32(cfg.ho * cfg.wo);
    let taps = u32(cfg.kh * cfg.kw);
    // the position this invocation gathers for every entry row: p0 + lid
    let r = p0 + lid;
    let live = r < cfg.rows;
    let s = r / plane;
    let l = r - s * plane;
    let oh = i32(l / u32(cfg.wo));
    let ow = i32(l) - oh * cfg.wo;
    let ih0 = oh * cfg.sh - cfg.ph;
    let iw0 = ow * cfg.sw - cfg.pw;
    let x_base = cfg.x_off + (s * cfg.c + grp * cfg.cg) * u32(cfg.h * cfg.w);
    var acc: array<f32, 16>;
    for (var q = 0u; q < 16u; q++) {
        acc[q] = 0.0;
    }
    for (var k0 = 0u; k0 < cfg.kg; k0 += 16u) {
        for (var q = 0u; q < 4u; q++) {
            let e = lid + 64u * q;
            let o = o0 + e / 16u;
            let k = k0 + e % 16u;
            var v = 0.0;
            if (o < cfg.og && k < cfg.kg) {
                v = f32(wt[cfg.w_off + (grp * cfg.og + o) * cfg.kg + k]);
            }
            tw[(e / 16u) * 17u + e % 16u] = v;
        }
        for (var q = 0u; q < 16u; q++) {
            let k = k0 + q;
            var v = 0.0;
            if (live && k < cfg.kg) {
                let c = k / taps;
                let tap = i32(k - c * taps);
                let i = tap / cfg.kw;
                let ih = ih0 + i * cfg.dh;
                let iw = iw0 + (tap - i * cfg.kw) * cfg.dw;
                if (ih >= 0 && ih < cfg.h && iw >= 0 && iw < cfg.w) {
                    v = f32(x[x_base + c * u32(cfg.h * cfg.w) + u32(ih * cfg.w + iw)]);
                }
            }
            tx_[q * 64u + lid] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            var b: array<f32, 4>;
            for (var j = 0u; j < 4u; j++) {
                b[j] = tx_[kk * 64u + tx + 16u * j];
            }
            for (var a = 0u; a < 4u; a++) {
                let wa = tw[(4u * ty + a) * 17u + kk];
                for (var j = 0u; j < 4u; j++) {
                    acc[a * 4u + j] += wa * b[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var j = 0u; j < 4u; j++) {
        let rp = p0 + tx + 16u * j;
        if (rp >= cfg.rows) {
            continue;
        }
        let sp = rp / plane;
        let lp = rp - sp * plane;
        for (var a = 0u; a < 4u; a++) {
            let o = o0 + 4u * ty + a;
            if (o < cfg.og) {
                y[cfg.y_off + (sp * cfg.o + grp * cfg.og + o) * plane + lp] = scalar(acc[a * 4u + j]);
            }
        }
    }
}

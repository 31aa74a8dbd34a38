// conv2d_backward_weight for small weight gradients, as a sum over positions r = (sample, oh, ow)
// spread over the whole GPU, with no im2col buffer, no reorder of grad and no atomics:
//   gw[grp, o, k] = sum_r grad[s, grp * og + o, oh, ow] * x[s, grp * cg + c, ih(oh, i), iw(ow, j)]
// with kernel entry k = (c * kh + i) * kw + j. Pass `partials`: workgroup (tile, grp, split) owns a
// 16 x 16 tile of (o, k) and one chunk of positions; it writes its partial sums to part[split].
// Pass `sum` (one invocation per weight element) adds the splits in split order, so the result is
// the same bits on every run. nn_conv_wgrad.py packs the uniform; `sum` includes grid.wgsl.
alias scalar = f32;

struct Config {
    n: u32,                 // sum: weight elements (grid.wgsl's count)
    gx: u32,                // sum: workgroups per grid row
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
    kg: u32,                // cg * kh * kw: kernel entries per output channel
    rows: u32,              // samples * ho * wo: positions summed over
    chunk: u32,             // positions per split, a multiple of 16
    tiles_k: u32,           // 16-wide tiles along kg
    g0: u32,                // first group of this launch (groups beyond the grid limit: several launches)
    splits: u32,
    grad_off: u32,
    x_off: u32,
    out_off: u32,
}

//// partials
@group(0) @binding(0) var<storage, read_write> part: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

// [row][position] tiles, rows padded to 17 so the column reads of `tb` fall in different banks
var<workgroup> ta: array<f32, 272>;     // grad rows: output channels o0 .. o0 + 15
var<workgroup> tb: array<f32, 272>;     // x rows: kernel entries k0 .. k0 + 15

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let o0 = (wid.x / cfg.tiles_k) * 16u;
    let k0 = (wid.x % cfg.tiles_k) * 16u;
    let grp = cfg.g0 + wid.y;
    let split = wid.z;
    let plane = u32(cfg.ho * cfg.wo);
    let taps = u32(cfg.kh * cfg.kw);
    // each invocation loads row ty of both tiles at position r0 + tx (consecutive tx: consecutive ow)
    let oa = o0 + ty;
    let a_ok = oa < cfg.og;
    let a_chan = grp * cfg.og + oa;
    let kb = k0 + ty;
    let b_ok = kb < cfg.kg;
    let cb = kb / taps;
    let tap = i32(kb - cb * taps);
    let ki = tap / cfg.kw;
    let kj = tap - ki * cfg.kw;
    let b_chan = grp * cfg.cg + cb;
    let h_off = ki * cfg.dh - cfg.ph;
    let w_off = kj * cfg.dw - cfg.pw;
    let r_begin = split * cfg.chunk;
    let r_end = min(r_begin + cfg.chunk, cfg.rows);
    var acc = 0.0;
    for (var r0 = r_begin; r0 < r_end; r0 += 16u) {
        let r = r0 + tx;
        var av = 0.0;
        var bv = 0.0;
        if (r < r_end) {
            let s = r / plane;
            let l = r - s * plane;
            let oh = i32(l / u32(cfg.wo));
            let ow = i32(l) - oh * cfg.wo;
            if (a_ok) {
                av = f32(grad[cfg.grad_off + (s * cfg.o + a_chan) * plane + l]);
            }
            let ih = oh * cfg.sh + h_off;
            let iw = ow * cfg.sw + w_off;
            if (b_ok && ih >= 0 && ih < cfg.h && iw >= 0 && iw < cfg.w) {
                bv = f32(x[cfg.x_off + ((s * cfg.c + b_chan) * u32(cfg.h) + u32(ih)) * u32(cfg.w) + u32(iw)]);
            }
        }
        ta[ty * 17u + tx] = av;
        tb[ty * 17u + tx] = bv;
        workgroupBarrier();
        for (var q = 0u; q < 16u; q++) {
            acc += ta[ty * 17u + q] * tb[tx * 17u + q];     // output (o0 + ty, k0 + tx)
        }
        workgroupBarrier();
    }
    let o = o0 + ty;
    let k = k0 + tx;
    if (o < cfg.og && k < cfg.kg) {
        part[split * cfg.o * cfg.kg + (grp * cfg.og + o) * cfg.kg + k] = acc;
    }
}

//// sum
@group(0) @binding(0) var<storage, read_write> gw: array<scalar>;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(e: u32) {
    var acc = 0.0;
    for (var s = 0u; s < cfg.splits; s++) {
        acc += part[s * cfg.n + e];
    }
    gw[cfg.out_off + e] = scalar(acc);
}

// conv2d_backward_weight for small weight gradients, as a sum over positions r = (sample, oh, ow)
// spread over the whole GPU, with no im2col buffer, no reorder of grad and no atomics:
//   gw[grp, o, k] = sum_r grad[s, grp * og + o, oh, ow] * x[s, grp * cg + c, ih(oh, i), iw(ow, j)]
// with kernel entry k = (c * kh + i) * kw + j. Pass `partials`: workgroup (tile, grp, split) owns a
// 16 x 16 tile of (o, k) and one chunk of positions; it writes its partial sums to part[split].
// Pass `sum` (one invocation per weight element) adds the splits in split order, so the result is
// the same bits on every run. conv_config.wgsl (the uniform, walk_on) is put in front; `sum` also includes grid.wgsl.
alias scalar = f32;

//// partials
@group(0) @binding(0) var<storage, read_write> part: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

// [row][position] tiles of 16 rows x 16 positions, rows padded to 17 so column reads spread over banks
var<workgroup> ta: array<f32, 272>;     // grad rows: output channels o0 .. o0 + 15
var<workgroup> tb: array<f32, 272>;     // x rows: kernel entries k0 .. k0 + 15

// 64 invocations, each 2 x 2 outputs of the tile: (o0 + 2 * ty + a, k0 + 2 * tx + b) for ty, tx in 0..7;
// each loads rows lrow + 4 * q (q in 0..3) of both tiles at position r0 + lcol
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid % 8u;
    let ty = lid / 8u;
    let lcol = lid % 16u;
    let lrow = lid / 16u;
    let o0 = (wid.x / cfg.tiles) * 16u;
    let k0 = (wid.x % cfg.tiles) * 16u;
    let grp = cfg.g0 + wid.y;
    let split = wid.z;
    let plane = u32(cfg.ho * cfg.wo);
    let taps = u32(cfg.kh * cfg.kw);
    // per loaded row: grad channel (or none), and x channel + window offsets of the kernel entry (or none)
    var a_chan: array<u32, 4>;
    var a_ok: array<bool, 4>;
    var b_chan: array<u32, 4>;
    var b_ok: array<bool, 4>;
    var h_off: array<i32, 4>;
    var w_off: array<i32, 4>;
    for (var q = 0u; q < 4u; q++) {
        let oa = o0 + lrow + 4u * q;
        a_ok[q] = oa < cfg.og;
        a_chan[q] = grp * cfg.og + oa;
        let kb = k0 + lrow + 4u * q;
        b_ok[q] = kb < cfg.kg;
        let cb = kb / taps;
        let tap = i32(kb - cb * taps);
        let ki = tap / cfg.kw;
        b_chan[q] = grp * cfg.cg + cb;
        h_off[q] = ki * cfg.dh - cfg.ph;
        w_off[q] = (tap - ki * cfg.kw) * cfg.dw - cfg.pw;
    }
    let r_begin = split * cfg.chunk;
    let r_end = min(r_begin + cfg.chunk, cfg.rows);
    var acc = vec4<f32>(0.0);             // outputs (2 ty, 2 tx), (2 ty, 2 tx + 1), (2 ty + 1, 2 tx), (2 ty + 1, 2 tx + 1)
    // this invocation's position r0 + lcol as (sample s, oh, ow): decoded once, then moved on by 16
    // positions per step without dividing
    var s = (r_begin + lcol) / plane;
    let l0 = r_begin + lcol - s * plane;
    var oh = i32(l0 / u32(cfg.wo));
    var ow = i32(l0) - oh * cfg.wo;
    for (var r0 = r_begin; r0 < r_end; r0 += 16u) {
        let live = r0 + lcol < r_end;
        let l = u32(oh * cfg.wo + ow);
        for (var q = 0u; q < 4u; q++) {
            var av = 0.0;
            var bv = 0.0;
            if (live && a_ok[q]) {
                av = f32(grad[cfg.a_off + (s * cfg.o + a_chan[q]) * plane + l]);
            }
            let ih = oh * cfg.sh + h_off[q];
            let iw = ow * cfg.sw + w_off[q];
            if (live && b_ok[q] && ih >= 0 && ih < cfg.h && iw >= 0 && iw < cfg.w) {
                bv = f32(x[cfg.b_off + ((s * cfg.c + b_chan[q]) * u32(cfg.h) + u32(ih)) * u32(cfg.w) + u32(iw)]);
            }
            ta[(lrow + 4u * q) * 17u + lcol] = av;
            tb[(lrow + 4u * q) * 17u + lcol] = bv;
        }
        walk_on(&s, &oh, &ow, 16, cfg.ho, cfg.wo);
        workgroupBarrier();
        for (var p = 0u; p < 16u; p++) {
            let a0 = ta[(2u * ty) * 17u + p];
            let a1 = ta[(2u * ty + 1u) * 17u + p];
            let b0 = tb[(2u * tx) * 17u + p];
            let b1 = tb[(2u * tx + 1u) * 17u + p];
            acc += vec4<f32>(a0, a0, a1, a1) * vec4<f32>(b0, b1, b0, b1);
        }
        workgroupBarrier();
    }
    for (var q = 0u; q < 4u; q++) {
        let o = o0 + 2u * ty + q / 2u;
        let k = k0 + 2u * tx + q % 2u;
        if (o < cfg.og && k < cfg.kg) {
            part[split * cfg.o * cfg.kg + (grp * cfg.og + o) * cfg.kg + k] = acc[q];
        }
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

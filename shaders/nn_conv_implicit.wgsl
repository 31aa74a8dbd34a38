// conv2d forward and conv2d_backward_input for small weights as implicit GEMMs, one dispatch each:
//   out[s, grp * M + m, a, b] = sum_k weight_at(grp, m, k) * image_at(grp, k as (ch, i, j), s, a, b)
// forward: m = output channel o, k = (c, i, j), image x at the window tap (0 in the padding);
// input gradient: m = input channel c, k = (o, i, j), image grad at the output position whose window
// puts tap (i, j) on (a, b) (0 when none: exact_div). The column is gathered tile by tile into
// workgroup memory, never written out, and out is written in NCHW directly (no reorder copy).
// Workgroup (tile, grp): 16 rows m x 64 positions r = (sample, a, b); 64 invocations of 4 x 4 outputs:
// rows m0 + 4 * ty + q, positions p0 + tx + 16 * j (consecutive tx: consecutive positions, so loads
// and stores coalesce). Sections `forward` / `input` define weight_at and image_at; nn_conv_implicit.py
// puts exact_div.wgsl and conv_config.wgsl (the uniform, walk_on) in front.
alias scalar = f32;

@group(0) @binding(0) var<storage, read_write> out: array<scalar>;
@group(0) @binding(1) var<storage, read> img: array<scalar>;
@group(0) @binding(2) var<storage, read> wt: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

var<workgroup> tw: array<f32, 272>;     // [16 rows][16 entries], rows padded to 17
var<workgroup> tc: array<f32, 1024>;    // [16 entries][64 positions]

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    let p0 = (wid.x % cfg.tiles) * 64u;
    let m0 = (wid.x / cfg.tiles) * 16u;
    let grp = cfg.g0 + wid.y;
    let plane = u32(cfg.out_h * cfg.out_w);
    // the position this invocation gathers for every entry row: p0 + lid
    let r = p0 + lid;
    let live = r < cfg.rows;
    let s = r / plane;
    let l = r - s * plane;
    let a = i32(l / u32(cfg.out_w));
    let b = i32(l) - a * cfg.out_w;
    // accumulators: one vec4 per row m0 + 4 * ty + q, lanes j = positions p0 + tx + 16 * j (no private
    // arrays indexed at run time: some drivers keep those in memory)
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    var ch = 0u;        // the entry k0 + q as (channel, tap row, tap column); see the gather loop
    var ti = 0;
    var tj = 0;
    for (var k0 = 0u; k0 < cfg.kred; k0 += 16u) {
        for (var q = 0u; q < 4u; q++) {
            let e = lid + 64u * q;
            let m = m0 + e / 16u;
            let k = k0 + e % 16u;
            var v = 0.0;
            if (m < cfg.m && k < cfg.kred) {
                v = weight_at(grp, m, k);
            }
            tw[(e / 16u) * 17u + e % 16u] = v;
        }
        for (var q = 0u; q < 16u; q++) {
            var v = 0.0;
            if (live && k0 + q < cfg.kred) {
                v = image_at(grp, ch, ti, tj, s, a, b);
            }
            tc[q * 64u + lid] = v;
            // the next entry: (ch, ti, tj) counts k = (ch * kh + ti) * kw + tj up without dividing
            walk_on(&ch, &ti, &tj, 1, cfg.kh, cfg.kw);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            let c = kk * 64u + tx;
            let col = vec4<f32>(tc[c], tc[c + 16u], tc[c + 32u], tc[c + 48u]);
            let wrow = 4u * ty * 17u + kk;
            acc0 += tw[wrow] * col;
            acc1 += tw[wrow + 17u] * col;
            acc2 += tw[wrow + 34u] * col;
            acc3 += tw[wrow + 51u] * col;
        }
        workgroupBarrier();
    }
    let m1 = m0 + 4u * ty;
    store_row(grp, m1, p0 + tx, plane, acc0);
    store_row(grp, m1 + 1u, p0 + tx, plane, acc1);
    store_row(grp, m1 + 2u, p0 + tx, plane, acc2);
    store_row(grp, m1 + 3u, p0 + tx, plane, acc3);
}

// row m of out at positions p, p + 16, p + 32, p + 48 (those before cfg.rows)
fn store_row(grp: u32, m: u32, p: u32, plane: u32, v: vec4<f32>) {
    if (m >= cfg.m) {
        return;
    }
    for (var j = 0u; j < 4u; j++) {
        let rp = p + 16u * j;
        if (rp < cfg.rows) {
            let sp = rp / plane;
            out[cfg.out_off + (sp * cfg.out_ch + grp * cfg.m + m) * plane + rp - sp * plane] = scalar(v[j]);
        }
    }
}

//// forward
// m = o, k = (c, i, j) = (ch, i, j); (a, b) = (oh, ow)
fn weight_at(grp: u32, m: u32, k: u32) -> f32 {
    return f32(wt[cfg.b_off + (grp * cfg.og + m) * cfg.kred + k]);
}

fn image_at(grp: u32, c: u32, i: i32, j: i32, s: u32, a: i32, b: i32) -> f32 {
    let ih = a * cfg.sh - cfg.ph + i * cfg.dh;
    let iw = b * cfg.sw - cfg.pw + j * cfg.dw;
    if (ih < 0 || ih >= cfg.h || iw < 0 || iw >= cfg.w) {
        return 0.0;
    }
    return f32(img[cfg.a_off + ((s * cfg.c + grp * cfg.cg + c) * u32(cfg.h) + u32(ih)) * u32(cfg.w) + u32(iw)]);
}

//// input
// m = c, k = (o, i, j) = (ch, i, j); (a, b) = (ih, iw); img is grad [N, O, Ho, Wo]
fn weight_at(grp: u32, m: u32, k: u32) -> f32 {
    let taps = u32(cfg.kh * cfg.kw);
    let o = k / taps;
    return f32(wt[cfg.b_off + ((grp * cfg.og + o) * cfg.cg + m) * taps + (k - o * taps)]);
}

fn image_at(grp: u32, o: u32, i: i32, j: i32, s: u32, a: i32, b: i32) -> f32 {
    let oh = exact_div(a + cfg.ph - i * cfg.dh, cfg.sh);
    let ow = exact_div(b + cfg.pw - j * cfg.dw, cfg.sw);
    if (oh < 0 || oh >= cfg.ho || ow < 0 || ow >= cfg.wo) {
        return 0.0;
    }
    return f32(img[cfg.a_off + ((s * cfg.o + grp * cfg.og + o) * u32(cfg.ho) + u32(oh)) * u32(cfg.wo) + u32(ow)]);
}

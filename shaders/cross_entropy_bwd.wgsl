// cross_entropy_bwd: d(logits) of one row from the row and its saved lse, one read and one write
// (see cross_entropy.wgsl), with p = exp(x - lse):
//   dx_c = g ((1 - s) w_t + (s / C) W) p_c - g (s / C) w_c - g (1 - s) w_t [c == t]   (0 where ignored)
// W = sum(w) is folded by each row's group first when the classes are weighted and smoothed.
@group(0) @binding(0) var<storage, read_write> dx: array<{{IO}}>;
@group(0) @binding(1) var<storage, read> grad: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<{{IO}}>;
@group(0) @binding(3) var<storage, read> tgt: array<{{TARGET}}>;
@group(0) @binding(4) var<storage, read> weight: array<scalar>;
@group(0) @binding(5) var<storage, read_write> err: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read> lse_in: array<scalar>;
@group(0) @binding(7) var<uniform> cfg: Config;

{{STORE_ACCESS}}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let at = place(lid, wid);
    var wsum = f32(cfg.classes);
    if (WEIGHTED && SMOOTH) {
        var part = vec4<f32>(0.0);
        for (var j = at.lane; j < cfg.classes; j += at.t) {
            part.z += w_at(j);
        }
        wsum = reduce_group(lid, at.lane, cfg.group, part, at.ninf).z;  // cfg.group (= at.t): Tint must see the barriers' loop bound uniform
    }
    if (!at.valid) {
        return;
    }
    let tg = target_of(at.r);
    let bad = !ignored(tg) && out_of_range(tg);
    if (bad && at.lane == 0u) {
        atomicOr(&err[0], cfg.err_bit);
    }
    let live = !ignored(tg) && !bad;
    let hot = select(0u, tg.x, live);
    let g = select(0.0, f32(grad[cfg.g_off + at.r]), live);
    let lse = f32(lse_in[cfg.l_off + at.r]);
    let s = cfg.smoothing;
    let wt = w_at(hot);
    let a = g * ((1.0 - s) * wt + s / f32(cfg.classes) * wsum);
    let b = g * s / f32(cfg.classes);
    let h = g * (1.0 - s) * wt;
    let row = cfg.x_off + at.r * cfg.classes;
    let orow = cfg.o_off + at.r * cfg.classes;
    if (VEC) {
        for (var j = at.lane * 4u; j < cfg.classes; j += at.t * 4u) {
            let p = exp(x_vec((row + j) / 4u) - vec4<f32>(lse));
            var d = a * p - b * w_vec(j);
            d -= select(vec4<f32>(0.0), vec4<f32>(h), vec4<u32>(j, j + 1u, j + 2u, j + 3u) == vec4<u32>(hot));
            // an ignored row is 0 even where its logits are infinite (0 * inf would be NaN)
            dx_vec((orow + j) / 4u, select(vec4<f32>(0.0), d, live));
        }
    } else {
        for (var j = at.lane; j < cfg.classes; j += at.t) {
            let p = exp(x_at(row + j) - lse);
            var d = a * p - b * w_at(j);
            d -= select(0.0, h, j == hot);
            dx_at(orow + j, select(0.0, d, live));
        }
    }
}

// cross_entropy_fwd: per row the loss and the logsumexp, one read of the row (see cross_entropy.wgsl).
//   loss = (1 - s) w_t (lse - x_t) + (s / C) (W (lse - x0) - sum_c w_c (x_c - x0))   (0 where ignored)
// x0, the row's first logit, keeps the smoothing sum small: sum w (lse - x) directly would cancel.
@group(0) @binding(0) var<storage, read_write> loss: array<scalar>;
@group(0) @binding(1) var<storage, read_write> lse_out: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<{{IO}}>;
@group(0) @binding(3) var<storage, read> tgt: array<{{TARGET}}>;
@group(0) @binding(4) var<storage, read> weight: array<scalar>;
@group(0) @binding(5) var<storage, read_write> err: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> cfg: Config;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let at = place(lid, wid);
    let row = cfg.x_off + select(0u, at.r, at.valid) * cfg.classes;
    let n = select(0u, cfg.classes, at.valid);
    var x0 = 0.0;
    if (SMOOTH && at.valid) {
        x0 = x_at(row);
    }
    var acc = vec4<f32>(at.ninf, 0.0, 0.0, 0.0);
    if (VEC) {
        for (var j = at.lane * 4u; j < n; j += at.t * 4u) {
            let v = x_vec((row + j) / 4u);
            acc = fold4(acc, v, at.ninf);
            if (SMOOTH) {
                let wv = w_vec(j);
                acc.z += dot(wv, v - vec4<f32>(x0));
                acc.w += dot(wv, vec4<f32>(1.0));
            }
        }
    } else {
        for (var j = at.lane; j < n; j += at.t) {
            let v = x_at(row + j);
            acc = merge(acc, vec4<f32>(v, 1.0, 0.0, 0.0), at.ninf);
            if (SMOOTH) {
                let wj = w_at(j);
                acc.z += wj * (v - x0);
                acc.w += wj;
            }
        }
    }
    acc = reduce_group(lid, at.lane, cfg.group, acc, at.ninf);  // cfg.group (= at.t): Tint must see the barriers' loop bound uniform
    if (!at.valid || at.lane != 0u) {
        return;
    }
    let lse = log(acc.y) + select(acc.x, 0.0, acc.x == at.ninf);
    lse_out[cfg.l_off + at.r] = scalar(lse);
    let tg = target_of(at.r);
    var out = 0.0;
    if (!ignored(tg)) {
        if (out_of_range(tg)) {
            atomicOr(&err[0], cfg.err_bit);
            out = bitcast<f32>(cfg.ninf | 0x00400000u);  // NaN; the flag raises at the next host read
        } else {
            out = (1.0 - cfg.smoothing) * w_at(tg.x) * (lse - x_at(row + tg.x));
            if (SMOOTH) {
                out += cfg.smoothing / f32(cfg.classes) * (acc.w * (lse - x0) - acc.z);
            }
        }
    }
    loss[cfg.o_off + at.r] = scalar(out);
}

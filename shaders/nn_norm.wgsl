// Batch normalization, the batch norm backward op and the weight / bias gradients of layer / RMS / group
// norm (their forward and gx are row ops of the row-op table: softmax.wgsl); statistics in f32 (two
// passes: the mean, then squared deviations from it, so offset data does not cancel).
//
// Parameter kernels (group norm's weight / bias gradients, batch norm): a power-of-two group of `group`
// invocations per parameter p (256 / group parameters per workgroup), reducing its `outer` runs of
// `inner` elements at o * outer_stride + p * p_stride + i; group norm's row of run o is
// o * groups + p / cg (groups = G, cg = C / G), whose (mean, rstd) its gx row op kept.
// Group kernels define `run_group` (shaders/row_group.wgsl writes their `main`), elementwise ones
// `run` (shaders/grid.wgsl): nn_norm.py includes the matching file.
alias scalar = f32;

struct Config {
    n: u32,                     // parameters or elements
    gx: u32,                    // workgroups per grid row
    group: u32,                 // invocations per row
    len: u32,                   // elements per row
    groups: u32,
    cg: u32,                    // parameters per group (batch norm: channels)
    inner: u32,
    outer: u32,
    outer_stride: u32,
    p_stride: u32,
    flags: u32,                 // 2: bias, 4: training (batch norm)
    eps: f32,
    off: array<vec4<u32>, 2>,   // element offsets of the storage bindings, in binding order
}

var<workgroup> red2: array<vec2<f32>, 256>;

// the sum of v over the t invocations (a power of two) sharing this one's row or parameter
fn row_sum2(lid: u32, lane: u32, t: u32, v: vec2<f32>) -> vec2<f32> {
    red2[lid] = v;
    workgroupBarrier();
    for (var s = t / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            red2[lid] += red2[lid + s];
        }
        workgroupBarrier();
    }
    let r = red2[lid - lane];
    workgroupBarrier();
    return r;
}

fn group_sum(lid: u32, lane: u32, t: u32, value: f32) -> f32 {
    return row_sum2(lid, lane, t, vec2<f32>(value, 0.0)).x;
}

fn row_of(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.y * cfg.gx + wid.x) * (256u / cfg.group) + lid / cfg.group;
}

fn param_addr(p: u32, e: u32) -> u32 {
    return (e / cfg.inner) * cfg.outer_stride + p * cfg.p_stride + e % cfg.inner;
}

//// param_grads
// gw[p] = sum g * xhat and gb[p] = sum g over parameter p's elements; row o * groups + p / cg's stats
@group(0) @binding(0) var<storage, read_write> gw: array<scalar>;
@group(0) @binding(1) var<storage, read_write> gb: array<scalar>;
@group(0) @binding(2) var<storage, read> g: array<scalar>;
@group(0) @binding(3) var<storage, read> x: array<scalar>;
@group(0) @binding(4) var<storage, read> stats: array<f32>;
@group(0) @binding(5) var<uniform> cfg: Config;

fn run_group(lid: u32, lane: u32, t: u32, p: u32) {
    let count = select(0u, cfg.outer * cfg.inner, p < cfg.n);
    var sw = 0.0;
    var sb = 0.0;
    for (var e = lane; e < count; e += t) {
        let a = param_addr(p, e);
        let row = (e / cfg.inner) * cfg.groups + p / cfg.cg;
        let gv = f32(g[cfg.off[0].z + a]);
        sw += gv * (f32(x[cfg.off[0].w + a]) - stats[2u * row]) * stats[2u * row + 1u];
        sb += gv;
    }
    sw = group_sum(lid, lane, t, sw);
    sb = group_sum(lid, lane, t, sb);
    if (lane == 0u && p < cfg.n) {
        gw[cfg.off[0].x + p] = scalar(sw);
        if ((cfg.flags & 2u) != 0u) {
            gb[cfg.off[0].y + p] = scalar(sb);
        }
    }
}

//// param_columns
// Layer / RMS norm weight and bias gradients, coalesced: item i = split * len + p folds column p over
// rows [split * inner, ...) in order (len: the columns, inner: rows per split, outer: the rows), so
// neighbouring invocations read neighbouring addresses of each row; (sum g * xhat, sum g) into parts[i].
@group(0) @binding(0) var<storage, read_write> parts: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> g: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<scalar>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<uniform> cfg: Config;

// item i of grid.wgsl's launch
fn run(i: u32) {
    let p = i % cfg.len;
    let begin = (i / cfg.len) * cfg.inner;
    let end = min(cfg.outer, begin + cfg.inner);
    var acc = vec2<f32>(0.0);
    for (var r = begin; r < end; r++) {
        let a = r * cfg.len + p;
        let gv = f32(g[cfg.off[0].z + a]);
        acc += vec2<f32>(gv * (f32(x[cfg.off[0].w + a]) - stats[2u * r]) * stats[2u * r + 1u], gv);
    }
    parts[i] = acc;
}

//// param_columns_final
// each column's splits folded in split order (cfg.groups of them): the same bits on every run
@group(0) @binding(0) var<storage, read_write> gw: array<scalar>;
@group(0) @binding(1) var<storage, read_write> gb: array<scalar>;
@group(0) @binding(2) var<storage, read> parts: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> cfg: Config;

// item p of grid.wgsl's launch: parameter p
fn run(p: u32) {
    var acc = vec2<f32>(0.0);
    for (var k = 0u; k < cfg.groups; k++) {
        acc += parts[k * cfg.len + p];
    }
    gw[cfg.off[0].x + p] = scalar(acc.x);
    if ((cfg.flags & 2u) != 0u) {
        gb[cfg.off[0].y + p] = scalar(acc.y);
    }
}

//// channel_stats
// (mean, variance) of parameter p's elements, in f32, as batch norm's training statistics (biased
// variance); needs a binding `x`, at element offset xo. Shifted by the channel's first value: at a large
// offset (1e6 + noise) a plain f32 sum of the values loses the noise; the sum of the differences keeps it,
// and a constant channel gets exactly its value as mean and 0 as variance.
fn channel_stats(lid: u32, lane: u32, t: u32, p: u32, xo: u32) -> vec2<f32> {
    let count = select(0u, cfg.outer * cfg.inner, p < cfg.n);
    let m = f32(max(cfg.outer * cfg.inner, 1u));
    let shift = select(0.0, f32(x[xo + param_addr(min(p, cfg.n - 1u), 0u)]), count > 0u);
    var s = 0.0;
    for (var e = lane; e < count; e += t) {
        s += f32(x[xo + param_addr(p, e)]) - shift;
    }
    let mean = shift + group_sum(lid, lane, t, s) / m;
    var q = 0.0;
    for (var e = lane; e < count; e += t) {
        let d = f32(x[xo + param_addr(p, e)]) - mean;
        q += d * d;
    }
    return vec2<f32>(mean, group_sum(lid, lane, t, q) / m);
}

//// bn_stats
@group(0) @binding(0) var<storage, read_write> mean_out: array<scalar>;
@group(0) @binding(1) var<storage, read_write> var_out: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

fn run_group(lid: u32, lane: u32, t: u32, p: u32) {
    let st = channel_stats(lid, lane, t, p, cfg.off[0].z);
    if (lane == 0u && p < cfg.n) {
        mean_out[cfg.off[0].x + p] = scalar(st.x);
        var_out[cfg.off[0].y + p] = scalar(st.y);
    }
}

//// bn_forward
// one invocation per element (grid.wgsl's launch); channel (i / inner) % cg
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<storage, read> w: array<scalar>;
@group(0) @binding(3) var<storage, read> b: array<scalar>;
@group(0) @binding(4) var<storage, read> mean: array<scalar>;
@group(0) @binding(5) var<storage, read> var_: array<scalar>;
@group(0) @binding(6) var<uniform> cfg: Config;

fn run(i: u32) {
    let c = (i / cfg.inner) % cfg.cg;
    let a = f32(w[cfg.off[0].z + c]) / sqrt(f32(var_[cfg.off[1].y + c]) + cfg.eps);
    let v = (f32(x[cfg.off[0].y + i]) - f32(mean[cfg.off[1].x + c])) * a + f32(b[cfg.off[0].w + c]);
    y[cfg.off[0].x + i] = scalar(v);
}

//// bn_train
// batch_norm with training=True from x's own statistics (f32, as bn_stats): one group per channel. Used
// where the statistics inputs were rounded to a narrow storage type.
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<storage, read> w: array<scalar>;
@group(0) @binding(3) var<storage, read> b: array<scalar>;
@group(0) @binding(4) var<uniform> cfg: Config;

fn run_group(lid: u32, lane: u32, t: u32, p: u32) {
    let c = min(p, cfg.n - 1u);
    let count = select(0u, cfg.outer * cfg.inner, p < cfg.n);
    let xo = cfg.off[0].y;
    let st = channel_stats(lid, lane, t, p, xo);
    let a = f32(w[cfg.off[0].z + c]) / sqrt(st.y + cfg.eps);
    let sh = f32(b[cfg.off[0].w + c]);
    for (var e = lane; e < count; e += t) {
        let i = param_addr(p, e);
        y[cfg.off[0].x + i] = scalar((f32(x[xo + i]) - st.x) * a + sh);
    }
}

//// bn_backward
// one group per channel: the sums, then gx of the channel's elements
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read_write> gw: array<scalar>;
@group(0) @binding(2) var<storage, read_write> gb: array<scalar>;
@group(0) @binding(3) var<storage, read> g: array<scalar>;
@group(0) @binding(4) var<storage, read> x: array<scalar>;
@group(0) @binding(5) var<storage, read> w: array<scalar>;
@group(0) @binding(6) var<storage, read> mean: array<scalar>;
@group(0) @binding(7) var<storage, read> var_: array<scalar>;
@group(0) @binding(8) var<uniform> cfg: Config;

fn run_group(lid: u32, lane: u32, t: u32, p: u32) {
    let valid = p < cfg.n;
    let c = min(p, cfg.n - 1u);
    let count = select(0u, cfg.outer * cfg.inner, valid);
    let mu = f32(mean[cfg.off[1].z + c]);
    let invstd = 1.0 / sqrt(f32(var_[cfg.off[1].w + c]) + cfg.eps);
    let go = cfg.off[0].w;
    let xo = cfg.off[1].x;
    var sg = 0.0;
    var sgx = 0.0;
    for (var e = lane; e < count; e += t) {
        let a = param_addr(p, e);
        let gv = f32(g[go + a]);
        sg += gv;
        sgx += gv * (f32(x[xo + a]) - mu);
    }
    sg = group_sum(lid, lane, t, sg);
    sgx = group_sum(lid, lane, t, sgx);
    let m = f32(cfg.outer * cfg.inner);
    let train = (cfg.flags & 4u) != 0u && m > 0.0;
    let mg = select(0.0, sg / m, train);
    let mx = select(0.0, sgx * invstd * invstd / m, train);
    let k = f32(w[cfg.off[1].y + c]) * invstd;
    for (var e = lane; e < count; e += t) {
        let a = param_addr(p, e);
        gx[cfg.off[0].x + a] = scalar(k * (f32(g[go + a]) - mg - (f32(x[xo + a]) - mu) * mx));
    }
    if (lane == 0u && valid) {
        gb[cfg.off[0].z + p] = scalar(sg);
        gw[cfg.off[0].y + p] = scalar(sgx * invstd);
    }
}

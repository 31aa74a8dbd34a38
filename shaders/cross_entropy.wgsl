// Shared by cross_entropy_fwd.wgsl and cross_entropy_bwd.wgsl (rumus_contracts.ops.cross_entropy).
// A group of `cfg.group` invocations (a power of two, 1..256) owns one row of the contiguous [rows,
// classes] logits: a whole workgroup for long rows, 256 / group rows per workgroup for short ones. Each
// invocation folds its elements (vec4 loads when rows are 4-aligned) into a running accumulator
// (max, sum of exp(x - max), sum of w (x - x0), sum of w); the group merges the accumulators through
// workgroup memory in a fixed tree, so results are the same on every run.
// cross_entropy.py fills the slots: the binding types, VEC / SMOOTH / WEIGHTED and the accessors.
alias scalar = f32;

struct Config {
    rows: u32,
    classes: u32,
    group: u32,        // invocations per row
    grid_x: u32,       // workgroups per grid row
    x_off: u32,        // element offsets: logits, target, weight, first output (loss | dx)
    t_off: u32,
    w_off: u32,
    o_off: u32,
    l_off: u32,        // lse (written by the forward, read by the backward)
    g_off: u32,        // grad of the loss (backward)
    ignore_lo: u32,    // ignore_index as an int64's two words
    ignore_hi: u32,
    smoothing: f32,
    ninf: u32,         // bits of -inf (kept out of constant expressions)
    err_bit: u32,      // this op's bit in the device's index error flag
    pad0: u32,
}

const VEC: bool = {{VEC}};
const SMOOTH: bool = {{SMOOTH}};
const WEIGHTED: bool = {{WEIGHTED}};

var<workgroup> red: array<vec4<f32>, 256>;

// (max, sum) pairs merge by rescaling both sums to the larger max; a -inf max means both sums are 0,
// shifted by 0 there (exp(-inf - -inf) would be NaN). The smoothing sums (z, w) just add.
fn merge(a: vec4<f32>, b: vec4<f32>, ninf: f32) -> vec4<f32> {
    let m = max(a.x, b.x);
    let shift = select(m, 0.0, m == ninf);
    return vec4<f32>(m, a.y * exp(a.x - shift) + b.y * exp(b.x - shift), a.z + b.z, a.w + b.w);
}

fn fold4(acc: vec4<f32>, v: vec4<f32>, ninf: f32) -> vec4<f32> {
    let m = max(acc.x, max(max(v.x, v.y), max(v.z, v.w)));
    let shift = select(m, 0.0, m == ninf);
    let e = exp(v - vec4<f32>(shift));
    return vec4<f32>(m, acc.y * exp(acc.x - shift) + ((e.x + e.y) + (e.z + e.w)), acc.z, acc.w);
}

// every invocation of the workgroup calls this (it has barriers); returns the row's merged accumulator
fn reduce_group(lid: u32, lane: u32, t: u32, acc: vec4<f32>, ninf: f32) -> vec4<f32> {
    red[lid] = acc;
    workgroupBarrier();
    for (var h = t / 2u; h > 0u; h = h / 2u) {
        if (lane < h) {
            red[lid] = merge(red[lid], red[lid + h], ninf);
        }
        workgroupBarrier();
    }
    return red[lid - lane];
}

fn w_at(c: u32) -> f32 {
    if (WEIGHTED) {
        return f32(weight[cfg.w_off + c]);
    }
    return 1.0;
}

fn w_vec(c: u32) -> vec4<f32> {
    return vec4<f32>(w_at(c), w_at(c + 1u), w_at(c + 2u), w_at(c + 3u));
}

// the target of row r as an int64's (low, high) words
fn target_of(r: u32) -> vec2<u32> {
    {{READ_TARGET}}
}

fn ignored(tg: vec2<u32>) -> bool {
    return tg.x == cfg.ignore_lo && tg.y == cfg.ignore_hi;
}

fn out_of_range(tg: vec2<u32>) -> bool {
    return tg.y != 0u || tg.x >= cfg.classes;
}

// where an invocation works: its row r (valid when r < rows), its lane in the row's group
struct Place {
    r: u32,
    lane: u32,
    valid: bool,
    t: u32,        // invocations per row
    ninf: f32,
}

fn place(lid: u32, wid: vec3<u32>) -> Place {
    let r = (wid.y * cfg.grid_x + wid.x) * (256u / cfg.group) + lid / cfg.group;
    return Place(r, lid % cfg.group, r < cfg.rows, cfg.group, bitcast<f32>(cfg.ninf));
}

{{ACCESS}}

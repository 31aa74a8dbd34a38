// The kernel of the row ops that read per-row operands (rumus_contracts/ops/row_ops.py's cross_entropy_fwd
// and cross_entropy_bwd): cross_entropy.py fills BODY with the walks, lets and stores that row_wgsl.py's
// index_shader renders from the table, and the bindings of the row inputs and row outputs. What stays
// here is the machinery the table does not describe: the launch layout, the group merge, the loads, and
// the reading of a class index with its range check.
// A group of `cfg.group` invocations (a power of two, 1..256) owns one row of the contiguous [rows,
// classes] input: a whole workgroup for long rows, 256 / group rows per workgroup for short ones. Each
// invocation folds its elements (vec4 loads when rows are 4-aligned) into a vec4 accumulator: (max, sum
// of exp(E - shift)) in x and y, a sum in z; the group merges the accumulators through workgroup memory
// in a fixed tree, so results are the same on every run.
alias scalar = f32;

struct Config {
    rows: u32,
    classes: u32,
    group: u32,        // invocations per row
    grid_x: u32,       // workgroups per grid row
    x_off: u32,        // element offsets: the input, the first output (per row or per element), the column
    o_off: u32,
    c_off: u32,
    err_bit: u32,      // this op's bit in the device's index error flag
    ignore_lo: u32,    // the index param (ignore_index) as an int64's two words ...
    ignore_hi: u32,
    ignore_i32: i32,   // ... and as the i32 an index equal to it reads as
    ninf: u32,         // bits of -inf (kept out of constant expressions)
    param: vec4<f32>,  // the op's other params, at their place in the table's order
    rin_off: vec4<u32>,  // element offsets of the row inputs
    rout_off: vec4<u32>, // ... and of the row outputs
}

const VEC: bool = {{VEC}};
const WEIGHTED: bool = {{WEIGHTED}};  // false: the column operand is all 1 (no class weights)

@group(0) @binding(0) var<storage, read_write> out0: array<{{OUT}}>;
@group(0) @binding(1) var<storage, read> x: array<{{IO}}>;
@group(0) @binding(2) var<storage, read> col0: array<scalar>;
@group(0) @binding(3) var<storage, read_write> err: array<atomic<u32>>;
{{BINDINGS}}

var<workgroup> red: array<vec4<f32>, 256>;

// (max, sum) pairs merge by rescaling both sums to the larger max; an infinite max shifts by 0 (the
// table's sh = where(isinf(m), 0, m): exp(-inf - -inf) would be NaN, and a row holding +inf sums to
// +inf). The sums in z and w just add.
fn merge(a: vec4<f32>, b: vec4<f32>, ninf: f32) -> vec4<f32> {
    let m = max(a.x, b.x);
    let shift = select(m, 0.0, abs(m) == -ninf);
    return vec4<f32>(m, a.y * exp(a.x - shift) + b.y * exp(b.x - shift), a.z + b.z, a.w + b.w);
}

fn fold1(acc: vec4<f32>, e: f32, ninf: f32) -> vec4<f32> {
    return merge(acc, vec4<f32>(e, 1.0, 0.0, 0.0), ninf);
}

fn fold4(acc: vec4<f32>, v: vec4<f32>, ninf: f32) -> vec4<f32> {
    let m = max(acc.x, max(max(v.x, v.y), max(v.z, v.w)));
    let shift = select(m, 0.0, abs(m) == -ninf);
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

fn c0_at(c: u32) -> f32 {
    if (WEIGHTED) {
        return f32(col0[cfg.c_off + c]);
    }
    return 1.0;
}

fn c0_vec(c: u32) -> vec4<f32> {
    return vec4<f32>(c0_at(c), c0_at(c + 1u), c0_at(c + 2u), c0_at(c + 3u));
}

{{ACCESS}}

// the table's at(operand, i): the element at index i of the row, 0 outside 0..classes-1 (never a read
// out of bounds)
fn at_c0(i: i32) -> f32 {
    if (i < 0 || i >= i32(cfg.classes)) {
        return 0.0;
    }
    return c0_at(u32(i));
}

fn at_x(row: u32, i: i32) -> f32 {
    if (i < 0 || i >= i32(cfg.classes)) {
        return 0.0;
    }
    return x_at(row + u32(i));
}

// a class index from an int64's (low, high) words as the i32 the rendered code compares: the index
// param's i32 where the int64s are equal, the value where it fits (and is not that i32), else a negative
// value other than it (so it fails the range check)
fn index_of(w: vec2<u32>) -> i32 {
    if (w.x == cfg.ignore_lo && w.y == cfg.ignore_hi) {
        return cfg.ignore_i32;
    }
    let v = bitcast<i32>(w.x);
    let fits = (w.y == 0u && v >= 0) || (w.y == 0xffffffffu && v < 0);
    return select(select(-1, -2, cfg.ignore_i32 == -1), v, fits && v != cfg.ignore_i32);
}

// an index outside 0..classes-1 that is not the index param sets this op's bit of the error flag
// (indexing.py): IndexOutOfRange at the next host read, without waiting for the GPU here
fn check_index(i: i32) {
    if (i != cfg.ignore_i32 && (i < 0 || i >= i32(cfg.classes))) {
        atomicOr(&err[0], cfg.err_bit);
    }
}

// where an invocation works: its row r (valid when r < rows), its lane in the row's group
struct Place {
    r: u32,
    lane: u32,
    valid: bool,
    ninf: f32,
}

fn place(lid: u32, wid: vec3<u32>) -> Place {
    let r = (wid.y * cfg.grid_x + wid.x) * (256u / cfg.group) + lid / cfg.group;
    return Place(r, lid % cfg.group, r < cfg.rows, bitcast<f32>(cfg.ninf));
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let at_ = place(lid, wid);
    let lane = at_.lane;
    let valid = at_.valid;
    let ninf = at_.ninf;
    let r = select(0u, at_.r, valid);  // an invalid invocation reads row 0 and stores nothing
    let row = cfg.x_off + r * cfg.classes;
    let n = f32(cfg.classes);
    let nn = select(0u, cfg.classes, valid);
    var acc = vec4<f32>(ninf, 0.0, 0.0, 0.0);
{{BODY}}
}

// Shared by the row kernels (reduce, argreduce, the row ops of softmax.wgsl): the output index space is the kept dims,
// each output owns a "row" of reduced elements. A group of `group` invocations (a power of two,
// 1..256) works on one row, so a workgroup of 256 serves 256 / group rows.

struct Config {
    rows: u32,              // number of rows (outputs)
    rlen: u32,              // elements per row
    group: u32,             // invocations per row
    grid_x: u32,            // workgroups per grid row
    chunk: u32,             // elements per split of a row (grid z)
    kdim: u32,              // number of kept dims
    rdim: u32,              // number of reduced dims
    splits: u32,            // 0: write final results; else the partial buffer holds `splits` per row
    in_offset: u32,
    out_offset: u32,
    ninf: u32,              // bits of -inf (kept out of constant expressions)
    out_rstride: i32,       // softmax: output stride along the row
    in1_delta: i32,         // softmax backward: element offset of the second input's rows from the first's
    param0: f32,            // row ops: their parameters (a norm's eps)
    param1: f32,
    pad2: u32,
    kshape: array<vec4<u32>, 2>,
    kstride_in: array<vec4<i32>, 2>,
    kstride_out: array<vec4<i32>, 2>,
    rshape: array<vec4<u32>, 2>,
    rstride: array<vec4<i32>, 2>,
    col_off: vec4<u32>,     // row ops: element offsets of the column operands (a norm's weight and bias)
}

@group(0) @binding({{CONFIG}}) var<uniform> cfg: Config;

// (input, output) element offsets of row `o`
fn row_offsets(o: u32) -> vec2<i32> {
    var rem = o;
    var off = vec2<i32>(i32(cfg.in_offset), i32(cfg.out_offset));
    for (var d = cfg.kdim; d > 0u; d--) {
        let k = d - 1u;
        let size = cfg.kshape[k / 4u][k % 4u];
        off += i32(rem % size) * vec2<i32>(cfg.kstride_in[k / 4u][k % 4u], cfg.kstride_out[k / 4u][k % 4u]);
        rem = rem / size;
    }
    return off;
}

// input offset of element r within a row, relative to the row start
fn elem_offset(r: u32) -> i32 {
    if (cfg.rdim <= 1u) {
        return i32(r) * cfg.rstride[0].x;
    }
    var rem = r;
    var off = 0;
    for (var d = cfg.rdim; d > 0u; d--) {
        let k = d - 1u;
        let size = cfg.rshape[k / 4u][k % 4u];
        off += i32(rem % size) * cfg.rstride[k / 4u][k % 4u];
        rem = rem / size;
    }
    return off;
}

fn row_index(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.y * cfg.grid_x + wid.x) * (256u / cfg.group) + lid / cfg.group;
}

// where an invocation works: row `o` (valid when o < rows), its lane in the row's group, and the row's
// (input, output) element offsets ((0, 0) for an invalid row)
struct RowPos {
    o: u32,
    lane: u32,
    valid: bool,
    base: vec2<i32>,
}

fn row_pos(lid: u32, wid: vec3<u32>) -> RowPos {
    let o = row_index(lid, wid);
    let valid = o < cfg.rows;
    var base = vec2<i32>(0, 0);
    if (valid) {
        base = row_offsets(o);
    }
    return RowPos(o, lid % cfg.group, valid, base);
}

// sum / prod / amax / amin over the leading dim of [rows, cols] with contiguous columns: the column sums
// of bias gradients ([tokens, features] summed over tokens). Each invocation owns one unit of columns
// (a vec4 of four neighbours, or one column when they are not 4-aligned) and folds its rows in order,
// so neighbouring invocations read neighbouring addresses of every row: coalesced loads. The rows are
// split over grid y (enough invocations to fill the GPU): `partial` writes each split's fold to
// `parts`, `fold_splits` folds a unit's partials in a fixed order, so the result has the same bits on every run.
// reduce.py fills BINDINGS, ACC (the accumulator type), IDENTITY, COMBINE(a, b), LOAD(v) and STORE(acc).
{{BINDINGS}}

struct Config {
    units: u32,        // column units (vec4s or columns) per row
    rows: u32,
    chunk: u32,        // rows per split
    splits: u32,
    in_offset: u32,    // in units
    out_offset: u32,   // in units
    row_stride: u32,   // in units
    ninf: u32,         // bits of -inf (kept out of constant expressions)
}

@group(0) @binding({{CONFIG}}) var<uniform> cfg: Config;

fn combine(a: {{ACC}}, b: {{ACC}}) -> {{ACC}} {
    return {{COMBINE}};
}

@compute @workgroup_size(256)
fn partial(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let u = wid.x * 256u + lid;
    if (u >= cfg.units) {
        return;
    }
    let begin = wid.y * cfg.chunk;
    let end = min(cfg.rows, begin + cfg.chunk);
    var acc: {{ACC}} = {{IDENTITY}};
    for (var r = begin; r < end; r++) {
        let v = in0[cfg.in_offset + r * cfg.row_stride + u];
        acc = combine(acc, {{LOAD}});
    }
    parts[wid.y * cfg.units + u] = acc;
}

// a workgroup folds FOLD_UNITS neighbouring units: invocation (unit u, slice k) folds splits k, k + 16, ...
// in order (many invocations, few dependent loads each: one invocation per unit would wait on every
// split's load in turn), then slice 0 folds the 16 slices in slice order. Same bits on every run.
const FOLD_UNITS: u32 = 16u;
const FOLD_SLICES: u32 = 16u;
var<workgroup> slices: array<{{ACC}}, 256>;

@compute @workgroup_size(256)
fn fold_splits(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let u = wid.x * FOLD_UNITS + lid % FOLD_UNITS;
    let k = lid / FOLD_UNITS;
    var acc: {{ACC}} = {{IDENTITY}};
    if (u < cfg.units) {
        for (var s = k; s < cfg.splits; s += FOLD_SLICES) {
            acc = combine(acc, parts[s * cfg.units + u]);
        }
    }
    slices[lid] = acc;
    workgroupBarrier();
    if (k == 0u && u < cfg.units) {
        for (var j = 1u; j < FOLD_SLICES; j++) {
            acc = combine(acc, slices[j * FOLD_UNITS + lid]);
        }
        out0[cfg.out_offset + u] = {{STORE}};
    }
}

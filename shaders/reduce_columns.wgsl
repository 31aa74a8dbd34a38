// sum / prod / amax / amin over the leading dim of [rows, cols] with contiguous columns: the column sums
// of bias gradients ([tokens, features] summed over tokens). Each invocation owns one unit of columns
// (a vec4 of four neighbours, or one column when they are not 4-aligned) and folds its rows in order,
// so neighbouring invocations read neighbouring addresses of every row: coalesced loads. The rows are
// split over grid y (enough invocations to fill the GPU): `partial` writes each split's fold to
// `parts`, `fold_splits` folds a unit's partials in split order, so the result has the same bits on every run.
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

@compute @workgroup_size(256)
fn fold_splits(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let u = wid.x * 256u + lid;
    if (u >= cfg.units) {
        return;
    }
    var acc: {{ACC}} = {{IDENTITY}};
    for (var s = 0u; s < cfg.splits; s++) {
        acc = combine(acc, parts[s * cfg.units + u]);
    }
    out0[cfg.out_offset + u] = {{STORE}};
}

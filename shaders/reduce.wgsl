// sum / prod / amax / amin over a row, and argmax / argmin (their accumulator a (value, index) pair).
// reduce.py fills HELPERS (declarations the others use, or nothing), ACC (accumulator type), IDENTITY,
// COMBINE(a, b), LOOP (this invocation's strided walk over its part of the row, scalar or vec4 loads,
// folding into `acc`) and STORE (the final or partial write of `acc`).
{{BINDINGS}}
{{HELPERS}}

var<workgroup> partials: array<{{ACC}}, 256>;

fn combine(a: {{ACC}}, b: {{ACC}}) -> {{ACC}} {
    return {{COMBINE}};
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = cfg.group;
    let pos = row_pos(lid, wid);
    let o = pos.o;
    let lane = pos.lane;
    let valid = pos.valid;
    let base = pos.base;
    var acc: {{ACC}} = {{IDENTITY}};
    if (valid) {
        let begin = wid.z * cfg.chunk;
        let end = min(cfg.rlen, begin + cfg.chunk);
{{LOOP}}
    }
    partials[lid] = acc;
    workgroupBarrier();
    for (var s = t / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            partials[lid] = combine(partials[lid], partials[lid + s]);
        }
        workgroupBarrier();
    }
    if (valid && lane == 0u) {
        let acc = partials[lid];
        {{STORE}}
    }
}

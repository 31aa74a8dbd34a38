// softmax / log_softmax along one dim, max-shifted, one invocation group per row; math in f32.
alias scalar = f32;

@group(0) @binding(0) var<storage, read_write> out0: array<scalar>;
@group(0) @binding(1) var<storage, read> in0: array<scalar>;

var<workgroup> partials: array<f32, 256>;

fn group_reduce(lid: u32, lane: u32, t: u32, value: f32, is_max: bool) -> f32 {
    partials[lid] = value;
    workgroupBarrier();
    for (var s = t / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            let other = partials[lid + s];
            partials[lid] = select(partials[lid] + other, max(partials[lid], other), is_max);
        }
        workgroupBarrier();
    }
    let r = partials[lid - lane];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = cfg.group;
    let o = row_index(lid, wid);
    let lane = lid % t;
    let valid = o < cfg.rows;
    let n = select(0u, cfg.rlen, valid);
    var base = vec2<i32>(0, 0);
    if (valid) {
        base = row_offsets(o);
    }
    let s_in = cfg.rstride[0].x;
    let sout = cfg.out_rstride;
    var m = bitcast<f32>(cfg.ninf);
    for (var r = lane; r < n; r += t) {
        m = max(m, f32(in0[u32(base.x + i32(r) * s_in)]));
    }
    m = group_reduce(lid, lane, t, m, true);
    var s = 0.0;
    for (var r = lane; r < n; r += t) {
        s += exp(f32(in0[u32(base.x + i32(r) * s_in)]) - m);
    }
    s = group_reduce(lid, lane, t, s, false);
    {{FINISH}}
    for (var r = lane; r < n; r += t) {
        let x = f32(in0[u32(base.x + i32(r) * s_in)]) - m;
        out0[u32(base.y + i32(r) * sout)] = scalar({{OUT}});
    }
}

// argmax / argmin along one dim (first index on ties); the int64 result is written as (index, 0).
// reduce.py fills VAL (compare type), LOAD(x), WORST (the identity) and BETTER(a, b) (a strictly better).
{{BINDINGS}}

var<workgroup> best_val: array<{{VAL}}, 256>;
var<workgroup> best_idx: array<u32, 256>;

fn better(a: {{VAL}}, b: {{VAL}}) -> bool {
    return {{BETTER}};
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = cfg.group;
    let pos = row_pos(lid, wid);
    let lane = pos.lane;
    var v: {{VAL}} = {{WORST}};
    var vi = 0xffffffffu;
    if (pos.valid) {
        for (var r = lane; r < cfg.rlen; r += t) {
            let x = {{LOAD}};
            if (better(x, v) || vi == 0xffffffffu) {
                v = x;
                vi = r;
            }
        }
    }
    best_val[lid] = v;
    best_idx[lid] = vi;
    workgroupBarrier();
    for (var s = t / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            let bv = best_val[lid + s];
            let bi = best_idx[lid + s];
            let av = best_val[lid];
            let ai = best_idx[lid];
            let take = bi != 0xffffffffu && (ai == 0xffffffffu || better(bv, av) || (!better(av, bv) && bi < ai));
            if (take) {
                best_val[lid] = bv;
                best_idx[lid] = bi;
            }
        }
        workgroupBarrier();
    }
    if (pos.valid && lane == 0u) {
        out0[u32(pos.base.y)] = vec2<u32>(best_idx[lid], 0u);
    }
}

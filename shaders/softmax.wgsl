// softmax / log_softmax along one dim; math in f32. A group of `cfg.group` invocations owns a row (a
// whole workgroup for long rows, 256 / group rows per workgroup for short ones). Two passes over the
// row instead of three: each invocation keeps an online (max, sum of exp(x - max)) pair, rescaling
// the sum when the max grows; the pairs merge in workgroup memory; the second pass writes the output.
// reduce.py fills LOAD (the walk over this invocation's elements: scalar, or vec4 on contiguous rows
// with `rlen` a multiple of 4), STORE_LOOP (the output pass), FINISH and OUT.
alias scalar = f32;

@group(0) @binding(0) var<storage, read_write> out0: array<{{OUT_TYPE}}>;
@group(0) @binding(1) var<storage, read> in0: array<{{IN_TYPE}}>;

var<workgroup> part_m: array<f32, 256>;
var<workgroup> part_s: array<f32, 256>;

// fold x into the running (max, sum): the sum is rescaled when the max grows; -inf adds nothing,
// NaN poisons the sum (as it poisons torch's result). Branch-free, one exp: e = exp(-|x - max|) is
// the rescale factor when x is the new max and x's own term otherwise.
fn online(acc: vec2<f32>, x: f32, ninf: f32) -> vec2<f32> {
    let grow = x > acc.x;
    let e = exp(-abs(x - acc.x));
    let add = select(select(e, 1.0, grow), 0.0, x == ninf);
    return vec2<f32>(select(acc.x, x, grow), acc.y * select(1.0, e, grow) + add);
}

fn merge(a: vec2<f32>, b: vec2<f32>, ninf: f32) -> vec2<f32> {
    let m = max(a.x, b.x);
    if (m == ninf) {
        return vec2<f32>(m, 0.0);
    }
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t = cfg.group;
    let o = row_index(lid, wid);
    let lane = lid % t;
    let valid = o < cfg.rows;
    let n = select(0u, cfg.rlen, valid);
    let ninf = bitcast<f32>(cfg.ninf);
    var base = vec2<i32>(0, 0);
    if (valid) {
        base = row_offsets(o);
    }
    let s_in = cfg.rstride[0].x;
    let sout = cfg.out_rstride;
    var acc = vec2<f32>(ninf, 0.0);
{{LOAD}}
    part_m[lid] = acc.x;
    part_s[lid] = acc.y;
    workgroupBarrier();
    for (var h = t / 2u; h > 0u; h = h / 2u) {
        if (lane < h) {
            let r = merge(vec2<f32>(part_m[lid], part_s[lid]), vec2<f32>(part_m[lid + h], part_s[lid + h]), ninf);
            part_m[lid] = r.x;
            part_s[lid] = r.y;
        }
        workgroupBarrier();
    }
    let m = part_m[lid - lane];
    let s = part_s[lid - lane];
    {{FINISH}}
{{STORE_LOOP}}
}

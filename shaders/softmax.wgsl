// The row ops of rumus_contracts/ops/row_ops.py along one dim (softmax, log_softmax, their backward,
// layer / RMS norm); math in f32. A group of `cfg.group` invocations owns a row (a whole workgroup for
// long rows, 256 / group rows per workgroup for short ones), each invocation about four loads of it,
// issued together (row_plan.py's unroll). Each walk over the row folds the invocation's elements into
// a pair (softmax: a running (max, sum of exp(x - max)); sums otherwise), the group merges the pairs;
// a last walk writes the output.
// A long row among few rows (ops of one walk) is split into `cfg.splits` chunks (grid z): PARTIAL
// writes each chunk's pair, FINAL merges a row's pairs and writes its chunk.
// softmax.py fills BODY (the walks, merges and store of one pass: single, partial or final), MERGE,
// REDUCE (subgroup or workgroup-memory merge), the binding types and PARTS (the bindings after in0).
alias scalar = f32;

@group(0) @binding(0) var<storage, read_write> out0: array<{{OUT_TYPE}}>;
@group(0) @binding(1) var<storage, read> in0: array<{{IN_TYPE}}>;
{{PARTS}}

var<workgroup> red_m: array<f32, 256>;
var<workgroup> red_s: array<f32, 256>;

// (max, sum) pairs merge by rescaling both sums to the larger max. A -inf max means both sums are 0
// (nothing seen, or only -inf): shift by 0 there, since exp(-inf - -inf) would be NaN. NaN and +inf
// poison the sum, as they poison torch's result.
fn merge_online(a: vec2<f32>, b: vec2<f32>, ninf: f32) -> vec2<f32> {
    let m = max(a.x, b.x);
    let shift = select(m, 0.0, m == ninf);
    return vec2<f32>(m, a.y * exp(a.x - shift) + b.y * exp(b.x - shift));
}

// fold four elements: one rescale of the running sum per vec4, the four exps independent of each other
fn fold4(acc: vec2<f32>, v: vec4<f32>, ninf: f32) -> vec2<f32> {
    let m = max(acc.x, max(max(v.x, v.y), max(v.z, v.w)));
    let shift = select(m, 0.0, m == ninf);
    let e = exp(v - vec4<f32>(shift));
    return vec2<f32>(m, acc.y * exp(acc.x - shift) + ((e.x + e.y) + (e.z + e.w)));
}

// fold sixteen elements (a step of four vec4 loads, row_plan.py's unroll): one max over all of them, one
// rescale of the running sum, sixteen independent exps
fn fold16(acc: vec2<f32>, a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, ninf: f32) -> vec2<f32> {
    let mv = max(max(a, b), max(c, d));
    let m = max(acc.x, max(max(mv.x, mv.y), max(mv.z, mv.w)));
    let shift = select(m, 0.0, m == ninf);
    let s = vec4<f32>(shift);
    let e = (exp(a - s) + exp(b - s)) + (exp(c - s) + exp(d - s));
    return vec2<f32>(m, acc.y * exp(acc.x - shift) + ((e.x + e.y) + (e.z + e.w)));
}

// how the group's pairs merge: merge_online, or adding them where the pair holds sums (softmax.py)
{{MERGE}}

fn fold1(acc: vec2<f32>, x: f32, ninf: f32) -> vec2<f32> {
    return merge(acc, vec2<f32>(x, 1.0), ninf);
}

{{REDUCE}}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>{{SG_ARGS}}) {
    let t = cfg.group;
    let ninf = bitcast<f32>(cfg.ninf);
    let vlid = {{VLID}};
    let pos = row_pos(vlid, wid);
    let o = pos.o;
    let lane = pos.lane;
    let valid = pos.valid;
    let base = pos.base;
    let s_in = cfg.rstride[0].x;
    let sout = cfg.out_rstride;
    let ib = u32(base.x);
    let ob = u32(base.y);
    // this workgroup's chunk of the row (the whole row unless split)
    let begin = select(0u, wid.z * cfg.chunk, cfg.splits > 0u);
    let end = select(0u, min(cfg.rlen, begin + cfg.chunk), valid);
    let delta = u32(cfg.in1_delta);
    var acc = {{INIT}};
{{BODY}}
}

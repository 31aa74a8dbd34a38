// graph_segment_sum / _mean / _max and graph_edge_softmax for the WebGPU backend. One invocation
// per (segment, feature) walks its segment's rows in order: no atomics, deterministic.
// A pointer outside [0, n_src] yields NaN instead of a read outside the buffer.
struct Params { n_seg: u32, f: u32, n_src: u32, o_out: u32, o_src: u32, o_ptr: u32, mode: u32, }
// mode (seg_reduce): 0 sum, 1 mean, 2 max

@group(0) @binding(0) var<storage, read_write> out_buf: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> ptr_buf: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;

// (lo, hi) of segment i, or (1, 0) when its pointers are invalid
fn bounds(i: u32) -> vec2<u32> {
    let lo = ptr_buf[p.o_ptr + i];
    let hi = ptr_buf[p.o_ptr + i + 1u];
    if (lo < 0 || hi < lo || u32(hi) > p.n_src) { return vec2<u32>(1u, 0u); }
    return vec2<u32>(u32(lo), u32(hi));
}

@compute @workgroup_size(256)
fn seg_reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let it = item(gid, nwg);
    if (it.t >= p.n_seg * p.f) { return; }
    let b = bounds(it.row);
    if (b.x > b.y) { out_buf[p.o_out + it.t] = bitcast<f32>(NAN_BITS); return; }
    var acc = 0.0;
    if (p.mode == 2u) {
        if (b.x < b.y) { acc = src[p.o_src + b.x * p.f + it.col]; }
        for (var k = b.x + 1u; k < b.y; k++) {
            let v = src[p.o_src + k * p.f + it.col];
            if (v > acc || (v != v && acc == acc)) { acc = v; }
        }
    } else {
        for (var k = b.x; k < b.y; k++) { acc += src[p.o_src + k * p.f + it.col]; }
        if (p.mode == 1u && b.y > b.x) { acc = acc / f32(b.y - b.x); }
    }
    out_buf[p.o_out + it.t] = acc;
}

// out[k, j] = exp(src[k, j] - m) / sum over the segment, m the segment's max (per feature j)
@compute @workgroup_size(256)
fn edge_softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let it = item(gid, nwg);
    if (it.t >= p.n_seg * p.f) { return; }
    let b = bounds(it.row);
    if (b.x > b.y) { return; }  // invalid pointers: rows unknown, nothing can be written safely
    var m = -3.4028235e38;
    for (var k = b.x; k < b.y; k++) { m = max(m, src[p.o_src + k * p.f + it.col]); }
    var s = 0.0;
    for (var k = b.x; k < b.y; k++) { s += exp(src[p.o_src + k * p.f + it.col] - m); }
    for (var k = b.x; k < b.y; k++) {
        out_buf[p.o_out + k * p.f + it.col] = exp(src[p.o_src + k * p.f + it.col] - m) / s;
    }
}

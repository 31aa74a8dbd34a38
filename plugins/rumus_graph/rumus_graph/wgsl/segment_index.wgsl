// graph_segment_argmax (int32 output) and graph_segment_expand for the WebGPU backend; one invocation
// per output element, no atomics. wgpu_kernels.py rewrites the two aliases per variant: argmax reads
// f32 and writes i32; expand copies f32 -> f32 or i32 -> i32.
alias T = f32;
alias OUT = i32;

struct Params { n_seg: u32, f: u32, n_src: u32, o_out: u32, o_src: u32, o_ptr: u32, }

@group(0) @binding(0) var<storage, read_write> out_buf: array<OUT>;
@group(0) @binding(1) var<storage, read> src: array<T>;
@group(0) @binding(2) var<storage, read> ptr_buf: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;

// the first row holding the segment's max, -1 for an empty segment (-2: invalid pointers)
@compute @workgroup_size(256)
fn seg_argmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let it = item(gid, nwg);
    if (it.t >= p.n_seg * p.f) { return; }
    let lo = ptr_buf[p.o_ptr + it.row];
    let hi = ptr_buf[p.o_ptr + it.row + 1u];
    if (lo < 0 || hi < lo || u32(hi) > p.n_src) { out_buf[p.o_out + it.t] = OUT(-2); return; }
    if (lo == hi) { out_buf[p.o_out + it.t] = OUT(-1); return; }
    var best = src[p.o_src + u32(lo) * p.f + it.col];
    var at = lo;
    for (var k = u32(lo) + 1u; k < u32(hi); k++) {
        let v = src[p.o_src + k * p.f + it.col];
        if (v > best || (v != v && best == best)) { best = v; at = i32(k); }
    }
    out_buf[p.o_out + it.t] = OUT(at);
}

// out[k, j] = src[segment(k), j]; segment(k) by binary search: the last i with ptr[i] <= k
@compute @workgroup_size(256)
fn seg_expand(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let it = item(gid, nwg);
    if (it.t >= p.n_src * p.f) { return; }
    var lo = 0u;
    var hi = p.n_seg;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (ptr_buf[p.o_ptr + mid] <= i32(it.row)) { lo = mid; } else { hi = mid; }
    }
    out_buf[p.o_out + it.t] = OUT(src[p.o_src + lo * p.f + it.col]);
}

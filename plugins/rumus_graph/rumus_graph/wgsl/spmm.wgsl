// graph_spmm, graph_spmm_t and graph_sddmm for the WebGPU backend. Bindings follow
// rumus_contracts.ShaderKernel: outputs, then the inputs (the structure bundle, then two value
// tensors), then the uniform params. Each output element is written by exactly one invocation (spmm:
// one per row and chunk of 16 features; sddmm: one per entry), so no atomics and a fixed summation
// order: results are deterministic.
// An index outside its range yields NaN (never a read outside a buffer); the Python API validates
// indices on the host before they reach a kernel.
struct Params {
    n_out: u32, f: u32, n_rows: u32, n_cols: u32, nnz: u32,
    o_out: u32, o_rowptr: u32, o_col: u32, o_cptr: u32, o_crow: u32, o_ceid: u32, o_v: u32, o_x: u32,
    transpose: u32,  // spmm only: 0 walks the rows (A @ x), 1 the column-grouped arrays (A.T @ x)
    chunk: u32,      // spmm only: features per invocation, 1 or up to CHUNK (see wgpu_kernels.spmm_chunk)
}

@group(0) @binding(0) var<storage, read_write> out_buf: array<f32>;
@group(0) @binding(1) var<storage, read> rowptr: array<i32>;
@group(0) @binding(2) var<storage, read> col: array<i32>;
@group(0) @binding(3) var<storage, read> csc_ptr: array<i32>;
@group(0) @binding(4) var<storage, read> csc_row: array<i32>;
@group(0) @binding(5) var<storage, read> csc_eid: array<i32>;
@group(0) @binding(6) var<storage, read> v_buf: array<f32>;
@group(0) @binding(7) var<storage, read> x_buf: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

// The walk of spmm over either orientation: pointers, the index of the x row each entry reads, and the
// entry's value index (itself in row order; csc_eid in column order). `p.transpose` is uniform, so
// every invocation takes the same branch.
fn ptr_at(i: u32) -> i32 {
    if (p.transpose == 1u) { return csc_ptr[p.o_cptr + i]; }
    return rowptr[p.o_rowptr + i];
}

fn src_at(k: u32) -> i32 {
    if (p.transpose == 1u) { return csc_row[p.o_crow + k]; }
    return col[p.o_col + k];
}

fn eid_at(k: u32) -> i32 {
    if (p.transpose == 1u) { return csc_eid[p.o_ceid + k]; }
    return i32(k);
}

// out[i, j] = sum over the entries k of row i (column i when transposed) of val[eid(k)] * x[src(k), j].
// One invocation per (output row, chunk of p.chunk features). On a GPU p.chunk is 1: neighbouring
// invocations read neighbouring features of one x row (coalesced). On a CPU rasterizer (lavapipe) it is
// CHUNK: each entry's index and value are then read once per 16 features, accumulated in registers.
const CHUNK: u32 = 16u;

@compute @workgroup_size(64)
fn spmm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = p.chunk;
    let chunks = (p.f + w - 1u) / w;
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t >= p.n_out * chunks) { return; }
    let i = t / chunks;
    let j0 = (t % chunks) * w;
    let width = min(w, p.f - j0);
    let n_src = select(p.n_cols, p.n_rows, p.transpose == 1u);
    let lo = ptr_at(i);
    let hi = ptr_at(i + 1u);
    var acc: array<f32, 16>;
    var one = 0.0;  // the accumulator when w == 1 (kept out of the array, so it stays in a register)
    var bad = lo < 0 || hi < lo || u32(hi) > p.nnz;
    if (!bad) {
        for (var k = u32(lo); k < u32(hi); k++) {
            let c = src_at(k);
            let e = eid_at(k);
            if (c < 0 || u32(c) >= n_src || e < 0 || u32(e) >= p.nnz) { bad = true; break; }
            let v = v_buf[p.o_v + u32(e)];
            let base = p.o_x + u32(c) * p.f + j0;
            if (w == 1u) {
                one += v * x_buf[base];
            } else {
                for (var j = 0u; j < width; j++) { acc[j] += v * x_buf[base + j]; }
            }
        }
    }
    if (w == 1u) { acc[0] = one; }
    let o = p.o_out + i * p.f + j0;
    for (var j = 0u; j < width; j++) { out_buf[o + j] = select(acc[j], bitcast<f32>(NAN_BITS), bad); }
}

// out[k] = dot(a[row(k), :], b[col[k], :]); row(k) by binary search in rowptr (last i with rowptr[i] <= k)
@compute @workgroup_size(256)
fn sddmm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = flat(gid, nwg);
    if (k >= p.nnz) { return; }
    var lo = 0u;
    var hi = p.n_rows;  // invariant: rowptr[lo] <= k < rowptr[hi]
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (rowptr[p.o_rowptr + mid] <= i32(k)) { lo = mid; } else { hi = mid; }
    }
    let c = col[p.o_col + k];
    if (c < 0 || u32(c) >= p.n_cols) {
        out_buf[p.o_out + k] = bitcast<f32>(NAN_BITS);
        return;
    }
    var acc = 0.0;
    for (var j = 0u; j < p.f; j++) {
        acc += v_buf[p.o_v + lo * p.f + j] * x_buf[p.o_x + u32(c) * p.f + j];
    }
    out_buf[p.o_out + k] = acc;
}

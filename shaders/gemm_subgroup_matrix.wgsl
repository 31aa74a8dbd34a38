// float16 GEMM on matrix units (tensor cores): C[z] = epilogue(A[z] @ B[z]), f32 accumulation.
// One workgroup computes a BM x BN block of C with SUBGROUPS subgroups; each subgroup owns a block of
// TM x TN 16x16 result matrices (subgroup_matrix_result, held in registers across K). A and B are
// staged BK at a time through workgroup memory in their own layout (a transposed operand is loaded
// with col_major = true), each element read from global memory once per workgroup, eight f16 per
// 16-byte load. With two buffers the next tile's global loads are issued before the current
// tile's math and one barrier per step suffices. The result goes through a per-subgroup f32 scratch
// (the epilogue: bias, activation, the f16 conversion, row masking) unless DIRECT stores f32 tiles
// straight into C. matrix_units.py generates the unrolled slots for one tile shape and layout.
enable f16;
enable chromium_experimental_subgroup_matrix;

struct Config {
    m: u32,
    n: u32,
    k: u32,
    lda: u32,     // row stride of A, B and C as stored (a transposed operand: its K-major rows)
    ldb: u32,
    ldc: u32,
    a_off: u32,   // element offsets, multiples of 8
    b_off: u32,
    c_off: u32,
    bsa: u32,     // batch strides (z = workgroup_id.z)
    bsb: u32,
    bsc: u32,
    ktiles: u32,  // ceil(k / BK)
    gx: u32,      // workgroups along N and M
    gy: u32,
    bias_off: u32,
}

@group(0) @binding(0) var<storage, read_write> c: array<{{C_TYPE}}>;
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;
{{BIAS_BINDING}}
@group(0) @binding({{CFG_BINDING}}) var<uniform> cfg: Config;

var<workgroup> a_sh: array<f16, {{A_SHARED}}>;
var<workgroup> b_sh: array<f16, {{B_SHARED}}>;
{{SCRATCH}}

fn put_a(i: u32, v: vec4<u32>) {
    let p0 = bitcast<vec2<f16>>(v.x);
    let p1 = bitcast<vec2<f16>>(v.y);
    let p2 = bitcast<vec2<f16>>(v.z);
    let p3 = bitcast<vec2<f16>>(v.w);
    a_sh[i] = p0.x; a_sh[i + 1u] = p0.y; a_sh[i + 2u] = p1.x; a_sh[i + 3u] = p1.y;
    a_sh[i + 4u] = p2.x; a_sh[i + 5u] = p2.y; a_sh[i + 6u] = p3.x; a_sh[i + 7u] = p3.y;
}

fn put_b(i: u32, v: vec4<u32>) {
    let p0 = bitcast<vec2<f16>>(v.x);
    let p1 = bitcast<vec2<f16>>(v.y);
    let p2 = bitcast<vec2<f16>>(v.z);
    let p3 = bitcast<vec2<f16>>(v.w);
    b_sh[i] = p0.x; b_sh[i + 1u] = p0.y; b_sh[i + 2u] = p1.x; b_sh[i + 3u] = p1.y;
    b_sh[i + 4u] = p2.x; b_sh[i + 5u] = p2.y; b_sh[i + 6u] = p3.x; b_sh[i + 7u] = p3.y;
}

fn gelu(x: f32) -> f32 {
    // the tanh form, as torch's approximate="tanh"; tanh through exp so large |u| cannot overflow
    let u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    let e = exp(-2.0 * abs(u));
    let t = sign(u) * (1.0 - e) / (1.0 + e);
    return 0.5 * x * (1.0 + t);
}

@compute @workgroup_size({{THREADS}})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sid: u32) {
    let z = wid.z;
    let a_off = cfg.a_off + z * cfg.bsa;
    let b_off = cfg.b_off + z * cfg.bsb;
    let c_off = cfg.c_off + z * cfg.bsc;
{{GRID}}
    let m0 = pm * {{BM}}u;
    let n0 = pn * {{BN}}u;
    // this subgroup's block of result tiles, relative to the workgroup's
    let wm_off = (sid / {{WN}}u) * {{SUB_M}}u;
    let wn_off = (sid % {{WN}}u) * {{SUB_N}}u;
{{DECLS}}
    var k0 = 0u;
{{LOAD}}
{{STORE_FIRST}}
    workgroupBarrier();
    for (var t = 0u; t < cfg.ktiles; t++) {
{{LOOP_BODY}}
    }
{{EPILOGUE}}
}

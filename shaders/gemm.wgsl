// Tiled GEMM, C[z] = A[z] @ B[z] (z: batch index, times the split of K when split-K is on).
// One workgroup computes a BM x BN block of C; each invocation owns TM x TN outputs held in vec4
// registers. K advances BK at a time through double-buffered workgroup memory: the next tile's
// global loads are issued before the current tile's math, so one barrier per step suffices.
// gemm.py generates the fully unrolled slots for one tile shape, operand layout and dtype.
alias scalar = f32;

struct Config {
    m: u32,
    n: u32,
    k: u32,
    kchunk: u32,            // K range per split
    a_off: u32,
    b_off: u32,
    c_off: u32,
    nbatch: u32,            // batches per split (z = split * nbatch + batch)
    sam: u32,               // A strides (rows, k)
    sak: u32,
    sbk: u32,               // B strides (k, cols)
    sbn: u32,
    scm: u32,               // C strides (rows, cols)
    scn: u32,
    split_stride: u32,      // C offset between splits (the split-K workspace)
    bdims: u32,             // batch dims (<= 4), innermost last
    bshape: vec4<u32>,
    bsa: vec4<u32>,         // batch strides of A, B, C
    bsb: vec4<u32>,
    bsc: vec4<u32>,
    zbase: u32,
}

@group(0) @binding(0) var<storage, read_write> c: array<{{C_TYPE}}>;
@group(0) @binding(1) var<storage, read> a: array<{{A_TYPE}}>;
@group(0) @binding(2) var<storage, read> b: array<{{B_TYPE}}>;
@group(0) @binding(3) var<uniform> cfg: Config;

var<workgroup> a_tile: array<vec4<f32>, {{A_TILE}}>;  // [buffer][k][BM / 4]
var<workgroup> b_tile: array<vec4<f32>, {{B_TILE}}>;  // [buffer][k][BN / 4]

@compute @workgroup_size({{THREADS}})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let z = wid.z + cfg.zbase;
    let split = z / cfg.nbatch;
    var bi = z % cfg.nbatch;
    var a_off = cfg.a_off;
    var b_off = cfg.b_off;
    var c_off = cfg.c_off + split * cfg.split_stride;
    for (var d = cfg.bdims; d > 0u; d--) {
        let size = cfg.bshape[d - 1u];
        let i = bi % size;
        bi = bi / size;
        a_off += i * cfg.bsa[d - 1u];
        b_off += i * cfg.bsb[d - 1u];
        c_off += i * cfg.bsc[d - 1u];
    }
    let kbeg = min(cfg.k, split * cfg.kchunk);
    let kend = min(cfg.k, kbeg + cfg.kchunk);
    let ktiles = (kend - kbeg + {{BK}}u - 1u) / {{BK}}u;
    let m0 = wid.y * {{BM}}u;
    let n0 = wid.x * {{BN}}u;
    let tx = lid % {{TX}}u;
    let ty = lid / {{TX}}u;
{{DECLS}}
    var k0 = kbeg;
    var dst = 0u;
{{LOAD_TILE}}
{{STORE_TILE}}
    workgroupBarrier();
    for (var t = 0u; t < ktiles; t++) {
        let src = dst;
        dst = 1u - dst;
        let more = t + 1u < ktiles;
        if (more) {
            k0 += {{BK}}u;
{{LOAD_TILE}}
        }
{{COMPUTE}}
        if (more) {
{{STORE_TILE}}
        }
        workgroupBarrier();
    }
{{STORE_C}}
}

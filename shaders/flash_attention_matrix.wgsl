// FlashAttention on matrix units (tensor cores), float16 q, k, v with f32 accumulation: the same algorithm
// and results as flash_attention.wgsl (forward: out and lse = m + log(l) per row; backward: FlashAttention-2's
// dK/dV pass over key blocks and dQ pass over query blocks, reading the row pass's lse and D = dout . out),
// for the unmasked and causal cases without dropout. matrix_attention.py writes each kernel's bindings and
// body (its register loops unrolled) after this shared part. The forward: one workgroup per (batch * head,
// block of 64 query rows), four subgroups of 32 lanes, each owning 16 query rows:
// - the subgroup's Q rows are staged once through its P region into D / 16 left matrices (registers);
// - per block of BC keys, K and V are copied into workgroup memory (eight f16 per 16-byte load), the
//   scores S = Q K^T are BC / 16 result matrices, stored to the subgroup's f32 region, where two lanes per
//   row run the online softmax (scale, causal mask, running max and sum, exactly as the scalar kernel)
//   and write P in f16 to the P region; a lane takes every other column of its row and the f32 rows are
//   SW = max(BC, D) + 2 words apart, so the 32 lanes of one access hit 32 different banks;
// - P V (f32 result matrices, zeroed per block) goes back through the f32 region and is added to the
//   row's output in registers, after the running output was rescaled by exp(m_old - m_new): a result
//   matrix cannot be scaled per row in place.
// The backward passes do the same with the roles of the blocks swapped; their accumulators (dK and dV of
// the subgroup's 16 keys, or dQ of its 16 queries) stay result matrices across the loop: no rescaling.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

struct Config {
    H: u32,
    L: u32,
    S: u32,
    causal: u32,
    scale: f32,
    neg_inf: u32,  // the bits of -inf (a WGSL constant infinity does not compile on Dawn)
    q_off: u32,
    k_off: u32,
    v_off: u32,
    o_off: u32,     // the first output: out, dk or dq
    lse_off: u32,
    x_off: u32,     // dout
    y_off: u32,     // the second output: dv
    pad0: u32,
    pad1: u32,
    pad2: u32,
    qs: vec4<u32>,  // element strides of batch, head and row
    ks: vec4<u32>,
    vs: vec4<u32>,
    os: vec4<u32>,
    xs: vec4<u32>,
    ys: vec4<u32>,
}

const D: u32 = {{D}}u;
const BC: u32 = {{BC}}u;
const DS: u32 = D + 8u;    // row stride of the K and V copies (padded against bank conflicts)
const SW: u32 = {{SW}}u;   // row stride of a subgroup's f32 region: max(BC, D) + 2 (bank spread)
const PW: u32 = {{PW}}u;   // row stride of a subgroup's f16 region (Q rows, P, the output): max(BC, D) + 8
const MASKED: f32 = -1.0e30;

// a block of 64 rows of two operands (K and V, or Q and dout), each subgroup's f32 and f16 regions, and
// (dK/dV) the block's per-query lse and D
var<workgroup> k_sh: array<f16, BC * DS>;
var<workgroup> v_sh: array<f16, BC * DS>;
var<workgroup> s_sh: array<f32, 64u * SW>;
var<workgroup> p_sh: array<f16, 64u * PW>;
var<workgroup> st_sh: array<f32, 2u * BC>;

{{PUTS}}

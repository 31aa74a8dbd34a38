// Integer-indexed kernels. Gather mode (gather, index_select, embedding): one invocation per output
// element, out[p] = x[p with p[dim] replaced by index[p]]. Deterministic scatter mode (scatter_add,
// index_add, embedding_backward): out[q] = x[q] + alpha * the sum of src over the index entries along
// dim that name q[dim]; each output element walks the `count` entries that may land on it (no atomics,
// bit-reproducible, O(outputs x count)). Atomic scatter mode: one invocation per index entry adds
// alpha * src into out[.., index, ..] with a compare-and-swap float add (O(entries), summation order
// varies run to run); the output was filled with x (or zeros) by a gather-free copy pass first.
// An index outside [0, dim_size) never reads or writes outside a buffer: the kernel ORs `op_bit` into
// the error flag `err`, which the recorder reads together with the next host read (no extra sync)
// and turns into IndexOutOfRange naming the op. indexing.py fills the slots.

struct Config {
    numel: u32,
    ndim: u32,
    row: u32,                       // invocations per grid row (grid.x * 256)
    dim: u32,
    dim_size: u32,                  // x.shape[dim] (the output's, when scattering)
    count: u32,                     // scatter: index entries along dim
    padding: i32,                   // embedding_backward: the row left at zero, or -1
    alpha: f32,
    op_bit: u32,                    // this op's bit in the error flag
    pad0: u32,
    pad1: u32,
    pad2: u32,
    offset: vec4<u32>,              // element offsets of out, x, index, src
    shape: array<vec4<u32>, 2>,     // iteration shape, up to 8 dims
    ishape: array<vec4<u32>, 2>,    // deterministic scatter: index shape (entries beyond it contribute nothing)
    strides: array<vec4<i32>, 8>,   // strides[d] = (out, x, index, src) along dim d
}

{{BINDINGS}}
@group(0) @binding({{CONFIG}}) var<uniform> cfg: Config;

fn index_at(k: u32) -> i32 {
    {{READ_INDEX}}
}

// the index at element k, or -1 after flagging the op when it is out of range
fn checked_index(k: u32) -> i32 {
    let j = index_at(k);
    if (j < 0 || j >= i32(cfg.dim_size)) {
        atomicOr(&err[0], cfg.op_bit);
        return -1;
    }
    return j;
}

{{HELPERS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.numel) {
        return;
    }
    var rem = i;
    var off = vec4<i32>(cfg.offset);
    var inside = true;
    var q = 0u;
    for (var d = cfg.ndim; d > 0u; d--) {
        let k = d - 1u;
        let size = cfg.shape[k / 4u][k % 4u];
        let c = rem % size;
        rem = rem / size;
        if (k == cfg.dim) {
            q = c;
            {{AT_DIM}}
        } else {
            off += i32(c) * cfg.strides[k];
            inside = inside && c < cfg.ishape[k / 4u][k % 4u];
        }
    }
{{BODY}}
}

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

// deterministic scatter: whether item i's coordinates off the indexed dim lie inside the index shape
// (entries beyond it contribute nothing)
fn inside_index(i: u32) -> bool {
    var rem = i;
    var inside = true;
    for (var d = cfg.ndim; d > 0u; d--) {
        let k = d - 1u;
        let size = cfg.shape[k / 4u][k % 4u];
        inside = inside && (k == cfg.dim || rem % size < cfg.ishape[k / 4u][k % 4u]);
        rem = rem / size;
    }
    return inside;
}

{{HELPERS}}

// indexing.py puts strided_grid.wgsl (the launch, `main`) and dim_split.wgsl in front
fn run(i: u32) {
    let split = split_at_dim(i, vec4<i32>(cfg.offset));
    let q = split.at;
    // AT_DIM (1 or 0 per tensor) picks the tensors that walk the indexed dim with the item's coordinate
    let off = split.off + i32(q) * cfg.strides[cfg.dim] * {{AT_DIM}};
{{BODY}}
}

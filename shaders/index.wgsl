// Integer-indexed kernels, one invocation per output element and no atomics, so results are
// deterministic. Gather mode (gather, index_select, embedding): out[p] = x[p with p[dim] replaced by
// index[p]]. Scatter mode (scatter_add, index_add, embedding_backward): out[q] = x[q] + alpha * the
// sum of src over the index entries along dim that name q[dim]; each output element walks the
// `count` entries that may land on it. Indices are clamped into range when gathering and never match
// when out of range when scattering, so no access leaves its buffer. indexing.py fills the slots.

struct Config {
    numel: u32,
    ndim: u32,
    row: u32,                       // invocations per grid row (grid.x * 256)
    dim: u32,
    dim_size: u32,                  // x.shape[dim]
    count: u32,                     // scatter: index entries along dim
    padding: i32,                   // embedding_backward: the row left at zero, or -1
    alpha: f32,
    offset: vec4<u32>,              // element offsets of out, x, index, src
    shape: array<vec4<u32>, 2>,     // output shape, up to 8 dims
    ishape: array<vec4<u32>, 2>,    // scatter: index shape (entries beyond it contribute nothing)
    strides: array<vec4<i32>, 8>,   // strides[d] = (out, x, index, src) along dim d
}

{{BINDINGS}}
@group(0) @binding({{CONFIG}}) var<uniform> cfg: Config;

fn index_at(k: u32) -> i32 {
    {{READ_INDEX}}
}

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
            off.x += i32(c) * cfg.strides[k].x;
            {{AT_DIM}}
        } else {
            off += i32(c) * cfg.strides[k];
            inside = inside && c < cfg.ishape[k / 4u][k % 4u];
        }
    }
{{BODY}}
}

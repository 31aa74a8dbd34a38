// Strided elementwise map over the output's logical index space. Inputs arrive already broadcast
// (stride 0 on broadcast dims). elementwise.py fills the slots: BINDINGS (outputs, then inputs),
// HELPERS (op helper functions), OFFSETS (offsets_1d after dims coalesce to one, else offsets_nd)
// and BODY (loads, the op, the store).

struct Config {
    numel: u32,
    ndim: u32,
    row: u32,                       // invocations per grid row (grid.x * 256)
    pad: u32,
    p: vec4<u32>,                   // op parameters: f32 bits or integer words
    q: vec4<u32>,
    offset: vec4<u32>,              // element offsets of out, in1, in2, in3
    shape: array<vec4<u32>, 2>,     // up to 8 dims, innermost last
    strides: array<vec4<i32>, 8>,   // strides[d] = (out, in1, in2, in3) along dim d
}

{{BINDINGS}}
@group(0) @binding({{CONFIG}}) var<uniform> cfg: Config;

fn offsets_1d(i: u32) -> vec4<u32> {
    return vec4<u32>(vec4<i32>(cfg.offset) + i32(i) * cfg.strides[0]);
}

fn offsets_nd(i: u32) -> vec4<u32> {
    var rem = i;
    var off = vec4<i32>(cfg.offset);
    for (var d = cfg.ndim; d > 0u; d--) {
        let size = cfg.shape[(d - 1u) / 4u][(d - 1u) % 4u];
        off += i32(rem % size) * cfg.strides[d - 1u];
        rem = rem / size;
    }
    return vec4<u32>(off);
}

{{HELPERS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.numel) {
        return;
    }
    let o = {{OFFSETS}}(i);
{{BODY}}
}

// Same-dtype copy between two layouts of up to four (coalesced) dims: .contiguous() of a transposed or
// permuted view (attention's head split). One invocation moves one unit: a vec4 when the innermost dim
// is contiguous on both sides and 4-aligned, else one element. The index math is four fixed div/mod
// steps on u32 and two integer dot products: no loop, no dynamic indexing, no 64-bit emulation.
// elementwise.py fills UNIT (the storage type moved per invocation).
@group(0) @binding(0) var<storage, read_write> out0: array<{{UNIT}}>;
@group(0) @binding(1) var<storage, read> in0: array<{{UNIT}}>;

struct Config {
    units: u32,             // units to move
    row: u32,               // invocations per grid row (grid.x * 256)
    out_offset: u32,        // in units
    in_offset: u32,
    size: vec4<u32>,        // dims, innermost last (size-1 dims pad the front)
    out_stride: vec4<i32>,  // in units
    in_stride: vec4<i32>,
}

@group(0) @binding(2) var<uniform> cfg: Config;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.units) {
        return;
    }
    let i3 = i % cfg.size.w;
    let r3 = i / cfg.size.w;
    let i2 = r3 % cfg.size.z;
    let r2 = r3 / cfg.size.z;
    let i1 = r2 % cfg.size.y;
    let idx = vec4<i32>(vec4<u32>(r2 / cfg.size.y, i1, i2, i3));
    out0[u32(i32(cfg.out_offset) + dot(idx, cfg.out_stride))] = in0[u32(i32(cfg.in_offset) + dot(idx, cfg.in_stride))];
}

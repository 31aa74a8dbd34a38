// Put in front of every graph shader by wgpu_kernels.source: the flat index of an invocation in a
// launch of 256-wide workgroups over a 2-D grid (wgpu_kernels._grid), and the bits of a quiet NaN
// (what an out-of-range index yields instead of a read outside a buffer).
const NAN_BITS: u32 = 0x7fc00000u;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

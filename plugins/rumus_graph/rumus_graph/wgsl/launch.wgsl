// Put in front of every graph shader by wgpu_kernels.source: the flat index of an invocation in a
// launch of 256-wide workgroups over a 2-D grid (wgpu_kernels._grid), the (row, column) it has in a
// row-major output of p.f columns (every graph shader's Params has the feature count f), and the bits of
// a quiet NaN (what an out-of-range index yields instead of a read outside a buffer).
const NAN_BITS: u32 = 0x7fc00000u;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

struct Item {
    t: u32,    // the flat index
    row: u32,
    col: u32,
}

fn item(gid: vec3<u32>, nwg: vec3<u32>) -> Item {
    let t = flat(gid, nwg);
    return Item(t, t / p.f, t % p.f);
}

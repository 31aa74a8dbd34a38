// Kernels that single out one dim of their iteration shape (index.wgsl: the indexed dim, sort.wgsl: the
// sorted one). cfg.shape holds the shape (cfg.ndim dims, innermost last), cfg.strides[d] each tensor's
// stride along d, cfg.dim the dim.

struct DimSplit {
    at: u32,                // the item's coordinate along cfg.dim
    off: vec4<i32>,         // the offsets it started from, moved along every other dim
}

fn split_at_dim(i: u32, start: vec4<i32>) -> DimSplit {
    var rem = i;
    var off = start;
    var at = 0u;
    for (var d = cfg.ndim; d > 0u; d--) {
        let k = d - 1u;
        let size = cfg.shape[k / 4u][k % 4u];
        let c = rem % size;
        rem = rem / size;
        if (k == cfg.dim) {
            at = c;
        } else {
            off += i32(c) * cfg.strides[k];
        }
    }
    return DimSplit(at, off);
}

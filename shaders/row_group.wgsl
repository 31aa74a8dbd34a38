// The entry of nn_norm.wgsl's group kernels: cfg.group invocations (a power of two) own each row or
// parameter, 256 / group of them per workgroup. A kernel that includes this file defines
// `fn run_group(lid: u32, lane: u32, t: u32, r: u32)`: r is its row or parameter (r >= cfg.n past the
// end, where it must still reach every barrier), lane its place in r's group of t, lid its place in
// the workgroup (for group_sum); `main` is written here once for all of them.

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    run_group(lid, lid % cfg.group, cfg.group, row_of(lid, wid));
}

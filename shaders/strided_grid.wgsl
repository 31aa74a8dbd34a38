// The launch of the strided kernels (index.wgsl, sort.wgsl): cfg.numel items, one per invocation, over a
// 2-D grid whose rows hold cfg.row invocations. A kernel that includes this file defines
// `fn run(i: u32)`, the work of item i; `main` is written here once.

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i < cfg.numel) {
        run(i);
    }
}

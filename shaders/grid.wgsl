// The launch of nn_common.dispatch: cfg.n items, 256 per workgroup, over a 2-D grid of workgroups
// (a grid dimension holds at most 65535 of them) whose rows are cfg.gx workgroups wide. A kernel that
// includes this file declares a uniform `cfg` starting with (n, gx) and defines `fn run(i: u32)`,
// the work of item i; `main` is written here once for all of them.

fn item(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.y * cfg.gx + wid.x) * 256u + lid;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = item(lid, wid);
    if (i < cfg.n) {
        run(i);
    }
}

// Shared by max_pool_backward.wgsl and avg_pool_backward.wgsl (pool_wgpu.py appends it to each): the cells
// that one invocation per non-overlapping window writes, tiling the input.
// [first, end) of the cell of output position o along one dim of `size` elements (n outputs).
fn cell(o: i32, s: i32, pad: i32, n: i32, size: i32) -> vec2<i32> {
    var first = o * s - pad;
    var end = (o + 1) * s - pad;
    if (o == 0) {
        first = 0;
    }
    if (o == n - 1) {
        end = size;
    }
    return vec2<i32>(clamp(first, 0, size), clamp(end, 0, size));
}

// Shared by max_pool_backward.wgsl and avg_pool_backward.wgsl (pool_wgpu.py appends it to each): which window
// an invocation has, and the cells that one invocation per non-overlapping window writes, tiling the input.
// Both shaders' Params name the sizes h, w (input) and ho, wo (output), the window sh, sw, ph, pw, and the
// output's offset out_off; both bind the output as gx.

// Window `idx` (its flat output index in a launch of 256-wide workgroups over a 2-D grid): its output
// position (oh, ow) and the offset of its plane in the input.
struct Window {
    idx: u32,
    oh: i32,
    ow: i32,
    base: u32,
}

fn window_of(gid: vec3<u32>, nwg: vec3<u32>) -> Window {
    let idx = gid.x + gid.y * nwg.x * 256u;
    let ow = i32(idx % u32(p.wo));
    let oh = i32((idx / u32(p.wo)) % u32(p.ho));
    return Window(idx, oh, ow, (idx / u32(p.ho * p.wo)) * u32(p.h * p.w));
}

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

// Writes the cell of window `win` in gx: v at the input positions in rows [keep.x, keep.y) and columns
// [keep.z, keep.w), 0 at the others.
fn write_cell(win: Window, v: f32, keep: vec4<i32>) {
    let rows = cell(win.oh, p.sh, p.ph, p.ho, p.h);
    let cols = cell(win.ow, p.sw, p.pw, p.wo, p.w);
    for (var ih = rows.x; ih < rows.y; ih++) {
        for (var iw = cols.x; iw < cols.y; iw++) {
            let inside = ih >= keep.x && ih < keep.y && iw >= keep.z && iw < keep.w;
            gx[p.out_off + win.base + u32(ih * p.w + iw)] = select(0.0, v, inside);
        }
    }
}

// The uniform of every conv and pooling kernel (nn_conv.wgsl, nn_conv_wgrad.wgsl, nn_conv_implicit.wgsl,
// nn_pool.wgsl), packed by conv_config.py: the window geometry, then what each kernel reads (the rest is 0).
struct Config {
    n: u32,                 // kernels launched by grid.wgsl: items (its count)
    gx: u32,                // and workgroups per grid row
    c: u32,
    h: i32,
    w: i32,
    kh: i32,
    kw: i32,
    sh: i32,
    sw: i32,
    ph: i32,
    pw: i32,
    dh: i32,
    dw: i32,
    ho: i32,
    wo: i32,
    o: u32,                 // conv output channels, all groups
    og: u32,                // conv output channels per group
    cg: u32,                // conv input channels per group
    kg: u32,                // cg * kh * kw: kernel entries per output channel
    m: u32,                 // implicit: GEMM rows per group, og (forward) or cg (input gradient)
    kred: u32,              // implicit: summed entries, cg * kh * kw or og * kh * kw
    out_ch: u32,            // implicit: channels of out, o or c
    out_h: i32,             // implicit: plane of out, (ho, wo) or (h, w)
    out_w: i32,
    rows: u32,              // positions: samples * ho * wo (wgrad) or samples * out_h * out_w
    chunk: u32,             // wgrad: positions per split, a multiple of 16
    splits: u32,            // wgrad: chunks
    tiles: u32,             // tiles along kg (wgrad, 16 wide) or along rows (implicit, 64 wide)
    g0: u32,                // first group of this launch (more groups than the grid allows: several launches)
    a_off: u32,             // element offsets: grad / image (the first input; im2col / col2im: x / gx),
    b_off: u32,             // x / weight (the second),
    out_off: u32,           // and the output
    sn: u32,                // im2col / col2im: sample stride of the column buffer
    sr: u32,                // and its row stride
    include_pad: u32,       // pooling: avg_pool2d's count_include_pad
    divisor: i32,           // pooling: avg_pool2d's divisor_override, 0 for none
    ninf: u32,              // pooling: bits of -inf (kept out of constant expressions)
}

// (hi, mid, lo), a place in a row-major walk over [*, mid_n, lo_n], moved on by `step` without dividing
// (the loop runs once per row of lo_n crossed: at most once for a step of 1)
fn walk_on(hi: ptr<function, u32>, mid: ptr<function, i32>, lo: ptr<function, i32>, step: i32, mid_n: i32,
           lo_n: i32) {
    *lo += step;
    while (*lo >= lo_n) {
        *lo -= lo_n;
        *mid += 1;
        if (*mid == mid_n) {
            *mid = 0;
            *hi += 1u;
        }
    }
}

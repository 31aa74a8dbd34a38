// avg_pool2d_backward for the WebGPU backend, one invocation per window, for non-overlapping windows (each stride
// at least its kernel size) (float32, NCHW, contiguous). Each invocation writes its whole cell of gx -- the input
// rows [oh*sh - ph, (oh+1)*sh - ph) and columns likewise, the first and last cells stretched to the input's
// edges -- grad / divisor inside its window, 0 elsewhere; the cells tile the input, so every element is written
// once. PyTorch's divisor: divisor_override, else the window clipped to the padded input (count_include_pad) or
// to the input. Bindings follow rumus_contracts.ShaderKernel: the output gx, the input grad, then the uniform
// buffer of pool_wgpu's params.
struct Params {
    h: i32, w: i32, ho: i32, wo: i32, kh: i32, kw: i32, sh: i32, sw: i32,
    ph: i32, pw: i32, include_pad: i32, divisor: i32,
    out_off: u32, g_off: u32, total: u32,
}

@group(0) @binding(0) var<storage, read_write> gx: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn avg_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let win = window_of(gid, nwg);
    if (win.idx >= p.total) { return; }
    // the window, clipped to the padded input (the divisor with padding), then to the input (the sum)
    let h0 = win.oh * p.sh - p.ph;
    let w0 = win.ow * p.sw - p.pw;
    let h1 = min(h0 + p.kh, p.h + p.ph);
    let w1 = min(w0 + p.kw, p.w + p.pw);
    let a0 = max(h0, 0);
    let b0 = max(w0, 0);
    let a1 = min(h1, p.h);
    let b1 = min(w1, p.w);
    var div = f32((a1 - a0) * (b1 - b0));
    if (p.divisor > 0) {
        div = f32(p.divisor);
    } else if (p.include_pad != 0) {
        div = f32((h1 - h0) * (w1 - w0));
    }
    write_cell(win, grad[p.g_off + win.idx] / div, vec4<i32>(a0, a1, b0, b1));
}

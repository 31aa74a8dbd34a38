// max_pool2d_backward for the WebGPU backend in one pass with no argmax buffer (float32, NCHW, contiguous), for
// non-overlapping windows (each stride at least its dilated window's extent). One invocation per window: it finds
// the window's maximum in x (the core's rule: the window's first element, then a later one only if greater or NaN)
// and writes its whole cell of gx -- the input rows [oh*sh - ph, (oh+1)*sh - ph) and columns likewise, the first
// and last cells stretched to the input's edges -- the window's grad at the maximum, 0 elsewhere. The cells tile
// the input, so every element is written once and x is read once (the core's kernel writes every window's argmax
// to a scratch buffer, then gathers: two passes). Bindings follow rumus_contracts.ShaderKernel: the output gx,
// the inputs grad and x, then the uniform buffer of pool_wgpu's params.
struct Params {
    h: i32, w: i32, ho: i32, wo: i32, kh: i32, kw: i32, sh: i32, sw: i32,
    ph: i32, pw: i32, dh: i32, dw: i32,
    out_off: u32, g_off: u32, x_off: u32, total: u32,
    ninf: u32,  // bits of -inf (kept out of constant expressions)
}

@group(0) @binding(0) var<storage, read_write> gx: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Flat index (ih * w + iw) of the maximum of the window of output (oh, ow) in the plane at `base`.
fn argmax(base: u32, oh: i32, ow: i32) -> i32 {
    var idx = -1;
    var best = bitcast<f32>(p.ninf);
    for (var i = 0; i < p.kh; i++) {
        let ih = oh * p.sh - p.ph + i * p.dh;
        if (ih < 0 || ih >= p.h) {
            continue;
        }
        for (var j = 0; j < p.kw; j++) {
            let iw = ow * p.sw - p.pw + j * p.dw;
            if (iw < 0 || iw >= p.w) {
                continue;
            }
            let v = x[base + u32(ih * p.w + iw)];
            if (idx < 0 || v > best || is_nan(v)) {
                idx = ih * p.w + iw;
                best = v;
            }
        }
    }
    return idx;
}

@compute @workgroup_size(256)
fn max_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let win = window_of(gid, nwg);
    if (win.idx >= p.total) { return; }
    let best = argmax(p.x_off + win.base, win.oh, win.ow);  // -1: no input element in the window
    let r = best / p.w;
    let c = best - r * p.w;
    let at_best = select(vec4<i32>(0, 0, 0, 0), vec4<i32>(r, r + 1, c, c + 1), best >= 0);
    write_cell(win, grad[p.g_off + win.idx], at_best);
}

// max_pool2d_backward for the WebGPU backend in one pass with no argmax buffer (float32, NCHW, contiguous).
// One invocation per input element gx[n, c, ih, iw]: it finds the windows covering it, finds each one's maximum
// again from x (the core's rule: the window's first element, then a later one only if greater or NaN) and adds
// that window's grad when the maximum is this element. Registered for non-overlapping windows only, where an
// element lies in at most one window, so each invocation re-scans one window (the core's kernel writes every
// window's argmax to a scratch buffer, then gathers: two passes). Bindings follow rumus_contracts.ShaderKernel:
// the output gx, the inputs grad and x, then the uniform buffer of pool_wgpu's params.
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

// The output position (along one dim) whose window holds `pos` at tap i, or -1.
fn window_of(pos: i32, i: i32, s: i32, pad: i32, d: i32, n: i32) -> i32 {
    let t = pos + pad - i * d;
    if (t < 0 || t % s != 0 || t / s >= n) {
        return -1;
    }
    return t / s;
}

@compute @workgroup_size(256)
fn max_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= p.total) {
        return;
    }
    let plane_size = u32(p.h * p.w);
    let plane = idx / plane_size;
    let here = i32(idx % plane_size);
    let ih = here / p.w;
    let iw = here % p.w;
    var acc = 0.0;
    for (var i = 0; i < p.kh; i++) {
        let oh = window_of(ih, i, p.sh, p.ph, p.dh, p.ho);
        if (oh < 0) {
            continue;
        }
        for (var j = 0; j < p.kw; j++) {
            let ow = window_of(iw, j, p.sw, p.pw, p.dw, p.wo);
            if (ow >= 0 && argmax(p.x_off + plane * plane_size, oh, ow) == here) {
                acc += grad[p.g_off + (plane * u32(p.ho) + u32(oh)) * u32(p.wo) + u32(ow)];
            }
        }
    }
    gx[p.out_off + idx] = acc;
}

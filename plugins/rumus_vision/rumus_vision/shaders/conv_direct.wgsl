// Direct 2-D convolution for the WebGPU backend (float32, NCHW, contiguous tensors), no im2col buffer.
// Bindings follow rumus_contracts.ShaderKernel: group 0 -- the output, then the two inputs, then the
// uniform buffer of conv_wgpu.params (geometry, then element offsets of the three tensors).
struct Params {
    n: u32, c: u32, h: u32, w: u32, o: u32, groups: u32, kh: u32, kw: u32,
    sh: u32, sw: u32, ph: u32, pw: u32, dh: u32, dw: u32, ho: u32, wo: u32,
    out_off: u32, a_off: u32, b_off: u32, total: u32,
    lanes: u32,  // backward_weight: invocations per weight element (a power of two, 1..256)
}

@group(0) @binding(0) var<storage, read_write> out_buf: array<f32>;
@group(0) @binding(1) var<storage, read> a_buf: array<f32>;
@group(0) @binding(2) var<storage, read> b_buf: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Input row (or column) of output position `o` and kernel tap `k`, as i32 (negative inside the padding).
fn src(o: u32, k: u32, s: u32, d: u32, pad: u32) -> i32 {
    return i32(o * s + k * d) - i32(pad);
}

// conv2d: one invocation per output element y[n, o, oh, ow]; a = x, b = weight.
@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= p.total) {
        return;
    }
    let ow = idx % p.wo;
    let oh = (idx / p.wo) % p.ho;
    let o = (idx / (p.wo * p.ho)) % p.o;
    let n = idx / (p.wo * p.ho * p.o);
    let cg = p.c / p.groups;
    let c0 = (o / (p.o / p.groups)) * cg;
    var acc = 0.0;
    for (var c = 0u; c < cg; c++) {
        let xbase = p.a_off + (n * p.c + c0 + c) * p.h * p.w;
        let wbase = p.b_off + (o * cg + c) * p.kh * p.kw;
        for (var i = 0u; i < p.kh; i++) {
            let ih = src(oh, i, p.sh, p.dh, p.ph);
            if (ih < 0 || ih >= i32(p.h)) {
                continue;
            }
            for (var j = 0u; j < p.kw; j++) {
                let iw = src(ow, j, p.sw, p.dw, p.pw);
                if (iw >= 0 && iw < i32(p.w)) {
                    acc += a_buf[xbase + u32(ih) * p.w + u32(iw)] * b_buf[wbase + i * p.kw + j];
                }
            }
        }
    }
    out_buf[p.out_off + idx] = acc;
}

// conv2d_backward_input: one invocation per input element gx[n, c, ih, iw]; a = grad, b = weight.
@compute @workgroup_size(256)
fn backward_input(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 256u;
    if (idx >= p.total) {
        return;
    }
    let iw = i32(idx % p.w);
    let ih = i32((idx / p.w) % p.h);
    let c = (idx / (p.w * p.h)) % p.c;
    let n = idx / (p.w * p.h * p.c);
    let cg = p.c / p.groups;
    let og = p.o / p.groups;
    let o0 = (c / cg) * og;
    var acc = 0.0;
    for (var o = o0; o < o0 + og; o++) {
        let gbase = p.a_off + (n * p.o + o) * p.ho * p.wo;
        let wbase = p.b_off + (o * cg + c % cg) * p.kh * p.kw;
        for (var i = 0u; i < p.kh; i++) {
            let t = ih + i32(p.ph) - i32(i * p.dh);
            if (t < 0 || t % i32(p.sh) != 0 || t / i32(p.sh) >= i32(p.ho)) {
                continue;
            }
            let oh = u32(t) / p.sh;
            for (var j = 0u; j < p.kw; j++) {
                let u = iw + i32(p.pw) - i32(j * p.dw);
                if (u >= 0 && u % i32(p.sw) == 0 && u / i32(p.sw) < i32(p.wo)) {
                    acc += a_buf[gbase + oh * p.wo + u32(u) / p.sw] * b_buf[wbase + i * p.kw + j];
                }
            }
        }
    }
    out_buf[p.out_off + idx] = acc;
}

// conv2d_backward_weight: `lanes` invocations per weight element gw[o, c, i, j] (total = their count), 256 /
// lanes elements per workgroup. Each invocation sums a strided part of the N*Ho*Wo products, then a fixed
// tree inside each group of lanes adds the parts (the same order on every run). The host picks lanes from
// N*Ho*Wo, so a late layer with a 1x1 output does not leave 255 of 256 invocations idle. a = grad, b = x.
var<workgroup> parts: array<f32, 256>;

@compute @workgroup_size(256)
fn backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
    let lane = lid % p.lanes;
    let idx = (wid.x + wid.y * nwg.x) * (256u / p.lanes) + lid / p.lanes;
    let live = idx < p.total;
    let j = idx % p.kw;
    let i = (idx / p.kw) % p.kh;
    let cg = p.c / p.groups;
    let cl = (idx / (p.kw * p.kh)) % cg;
    let o = idx / (p.kw * p.kh * cg);
    let c = (o / (p.o / p.groups)) * cg + cl;
    let plane = p.ho * p.wo;
    var acc = 0.0;
    if (live) {
        for (var m = lane; m < p.n * plane; m += p.lanes) {
            let ow = m % p.wo;
            let oh = (m / p.wo) % p.ho;
            let n = m / plane;
            let ih = src(oh, i, p.sh, p.dh, p.ph);
            let iw = src(ow, j, p.sw, p.dw, p.pw);
            if (ih >= 0 && ih < i32(p.h) && iw >= 0 && iw < i32(p.w)) {
                acc += a_buf[p.a_off + (n * p.o + o) * plane + oh * p.wo + ow]
                     * b_buf[p.b_off + ((n * p.c + c) * p.h + u32(ih)) * p.w + u32(iw)];
            }
        }
    }
    parts[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lane < s && s < p.lanes) {
            parts[lid] += parts[lid + s];
        }
        workgroupBarrier();
    }
    if (live && lane == 0u) {
        out_buf[p.out_off + idx] = parts[lid];
    }
}

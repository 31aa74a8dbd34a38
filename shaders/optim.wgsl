// Fused optimizer steps over contiguous parameter / state buffers (PyTorch's update rules).
// Host-side constants: bias corrections and decay factors are folded in float64 before upload.
alias scalar = f32;

struct Config {
    n: u32,
    row: u32,              // invocations per grid row
    flags: u32,            // adam: bit 0 coupled weight decay | sgd: bit 0 momentum, 1 nesterov, 2 first step
    pad: u32,
    offset: vec4<u32>,     // element offsets of the (up to four) tensors, in binding order
    c: vec4<f32>,          // adam: lr / bc1, beta1, 1 - beta1, eps | sgd: lr, momentum, 1 - dampening, weight decay
    d: vec4<f32>,          // adam: weight decay, decay factor (1 - lr * wd), 1 / sqrt(bc2), beta2
    e: vec4<f32>,          // adam: 1 - beta2, -, -, -
}

@group(0) @binding(4) var<uniform> cfg: Config;

// one layout for both steps: sgd binds its momentum buffer as state1 and a dummy as state2
@group(0) @binding(0) var<storage, read_write> param: array<scalar>;
@group(0) @binding(1) var<storage, read> grad: array<scalar>;
@group(0) @binding(2) var<storage, read_write> state1: array<scalar>;
@group(0) @binding(3) var<storage, read_write> state2: array<scalar>;

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.n) {
        return;
    }
    var p = f32(param[cfg.offset.x + i]);
    var g = f32(grad[cfg.offset.y + i]);
    if ((cfg.flags & 1u) != 0u) {
        g = g + cfg.d.x * p;
    }
    p = p * cfg.d.y;
    let m = cfg.c.y * f32(state1[cfg.offset.z + i]) + cfg.c.z * g;
    let v = cfg.d.w * f32(state2[cfg.offset.w + i]) + cfg.e.x * g * g;
    state1[cfg.offset.z + i] = scalar(m);
    state2[cfg.offset.w + i] = scalar(v);
    param[cfg.offset.x + i] = scalar(p - cfg.c.x * m / (sqrt(v) * cfg.d.z + cfg.c.w));
}

@compute @workgroup_size(256)
fn sgd(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.n) {
        return;
    }
    let p = f32(param[cfg.offset.x + i]);
    var g = f32(grad[cfg.offset.y + i]) + cfg.c.w * p;
    if ((cfg.flags & 1u) != 0u) {
        var b = g;
        if ((cfg.flags & 4u) == 0u) {
            b = cfg.c.y * f32(state1[cfg.offset.z + i]) + cfg.c.z * g;
        }
        state1[cfg.offset.z + i] = scalar(b);
        g = select(b, g + cfg.c.y * b, (cfg.flags & 2u) != 0u);
    }
    param[cfg.offset.x + i] = scalar(p - cfg.c.x * g);
}

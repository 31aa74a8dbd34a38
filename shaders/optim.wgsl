// Fused optimizer steps over contiguous parameter / state buffers (PyTorch's update rules).
// adam with host constants: bias corrections and decay factors are folded in float64 before upload.
// adam with flag bit 3 (adam_step_dev_, under a GradScaler): the step count and the skip flag are read
// from device buffers, and the bias corrections are computed here from step + 1.
alias scalar = f32;

struct Config {
    n: u32,
    row: u32,              // invocations per grid row
    flags: u32,            // adam: bit 0 coupled weight decay, 1 maximize, 2 amsgrad, 3 device step and skip flag
                           // sgd: bit 0 momentum, 1 nesterov, 2 first step
    pad: u32,
    offset: vec4<u32>,     // element offsets of param, grad, state1, state2
    offset2: vec4<u32>,    // element offsets of state3, count, skip
    c: vec4<f32>,          // adam: lr / bc1 (lr with bit 3), beta1, 1 - beta1, eps | sgd: lr, momentum, 1 - dampening, wd
    d: vec4<f32>,          // adam: weight decay, decay factor (1 - lr * wd), 1 / sqrt(bc2), beta2
    e: vec4<f32>,          // adam: 1 - beta2, log(beta1), log(beta2) (bit 3; float64 logs, -1e30 for beta 0), -
}

// one layout for every entry: what an entry does not use is bound to a dummy buffer
// (sgd: its momentum buffer is state1; adam: exp_avg, exp_avg_sq, amsgrad's running maximum)
@group(0) @binding(0) var<storage, read_write> param: array<scalar>;
@group(0) @binding(1) var<storage, read> grad: array<scalar>;
@group(0) @binding(2) var<storage, read_write> state1: array<scalar>;
@group(0) @binding(3) var<storage, read_write> state2: array<scalar>;
@group(0) @binding(4) var<storage, read_write> state3: array<scalar>;
@group(0) @binding(5) var<storage, read> count: array<f32>;
@group(0) @binding(6) var<storage, read> skip: array<f32>;
@group(0) @binding(7) var<uniform> cfg: Config;

// 1 - e^x for x <= 0 (a bias correction 1 - beta^t): a series near 0, where 1 - exp(x) in float32 would
// cancel (beta2 = 0.999 at t = 1 keeps 4 digits that way); the series' first omitted term at |x| = 0.5 is
// 3e-10 relative
fn one_minus_exp(x: f32) -> f32 {
    if (x < -0.5) {
        return 1.0 - exp(x);
    }
    var s = 1.0;
    for (var k = 10.0; k >= 2.0; k = k - 1.0) {
        s = 1.0 + x * s / k;
    }
    return -x * s;
}

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.n) {
        return;
    }
    var step_size = cfg.c.x;
    var inv_sqrt_bc2 = cfg.d.z;
    if ((cfg.flags & 8u) != 0u) {
        // the GradScaler found an inf/NaN: this step is skipped, nothing is written (any flag but +-0, NaN
        // included: tested on the bits, which no NaN-free assumption of the compiler can drop)
        if ((bitcast<u32>(skip[cfg.offset2.z]) & 0x7fffffffu) != 0u) {
            return;
        }
        let t = count[cfg.offset2.y] + 1.0;
        step_size = cfg.c.x / one_minus_exp(t * cfg.e.y);
        inv_sqrt_bc2 = 1.0 / sqrt(one_minus_exp(t * cfg.e.z));
    }
    var p = f32(param[cfg.offset.x + i]);
    var g = f32(grad[cfg.offset.y + i]);
    if ((cfg.flags & 2u) != 0u) {
        g = -g;
    }
    if ((cfg.flags & 1u) != 0u) {
        g = g + cfg.d.x * p;
    }
    p = p * cfg.d.y;
    let m = cfg.c.y * f32(state1[cfg.offset.z + i]) + cfg.c.z * g;
    var v = cfg.d.w * f32(state2[cfg.offset.w + i]) + cfg.e.x * g * g;
    state1[cfg.offset.z + i] = scalar(m);
    state2[cfg.offset.w + i] = scalar(v);
    if ((cfg.flags & 4u) != 0u) {
        v = max(v, f32(state3[cfg.offset2.x + i]));
        state3[cfg.offset2.x + i] = scalar(v);
    }
    param[cfg.offset.x + i] = scalar(p - step_size * m / (sqrt(v) * inv_sqrt_bc2 + cfg.c.w));
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


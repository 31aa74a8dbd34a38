// The loss scaler's ops (rumus.amp.GradScaler), float32, in place; the host never reads the flag.
// Non-finite tests use the bit pattern (exponent all ones), so no fast-math assumption can drop them.

struct Config {
    n: u32,          // unscale_check: gradient elements
    row: u32,        // invocations per grid row
    a: u32,          // element offsets: unscale_check grad | update_scale scale
    b: u32,          //                  found_inf          | growth_tracker
    c: u32,          //                  inv_scale          | found_inf
    interval: u32,   // update_scale: growth_interval
    growth: f32,
    backoff: f32,
}

@group(0) @binding(3) var<uniform> cfg: Config;

// unscale_check: grad, found_inf (written as the bits of 1.0 with an atomic OR: race-free), inv_scale
@group(0) @binding(0) var<storage, read_write> t0: array<f32>;
@group(0) @binding(1) var<storage, read_write> t1: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> t2: array<f32>;

fn non_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) >= 0x7f800000u;
}

@compute @workgroup_size(256)
fn unscale_check(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * cfg.row + gid.x;
    if (i >= cfg.n) {
        return;
    }
    let v = t0[cfg.a + i];
    if (non_finite(v)) {
        atomicOr(&t1[cfg.b], 0x3f800000u);  // 0.0 | bits(1.0) == 1.0
    }
    t0[cfg.a + i] = v * t2[cfg.c];
}

// update_scale: scale (t0), growth_tracker (t1, as bits), found_inf (t2); one invocation
@compute @workgroup_size(1)
fn update_scale() {
    let scale = t0[cfg.a];
    if (t2[cfg.c] != 0.0) {
        t0[cfg.a] = scale * cfg.backoff;
        atomicStore(&t1[cfg.b], 0u);
        return;
    }
    let successful = bitcast<f32>(atomicLoad(&t1[cfg.b])) + 1.0;
    if (successful >= f32(cfg.interval)) {
        let grown = scale * cfg.growth;
        if (!non_finite(grown)) {  // a scale that would overflow stays where it is
            t0[cfg.a] = grown;
        }
        atomicStore(&t1[cfg.b], 0u);
    } else {
        atomicStore(&t1[cfg.b], bitcast<u32>(successful));
    }
}

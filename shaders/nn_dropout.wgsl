// Counter-based dropout (rumus_contracts/ops/nn.py; the same hash as csrc/nn_dropout.c, so a seed
// gives the same mask on every backend): keep(i) = mix32(mix32((offset + i) ^ key) + key) >= threshold
// with key = mix32(seed ^ 0x9E3779B9) worked out on the host. u32 arithmetic wraps, as in C.
alias scalar = f32;

struct Config {
    n: u32,
    gx: u32,
    key: u32,
    threshold: u32,
    offset: u32,            // the counter of element 0 (the op's `offset` attribute)
    scale: f32,             // 1 / (1 - p), rounded to float32 on the host like the C kernel's
    y_off: u32,
    x_off: u32,
}

fn mix32(v: u32) -> u32 {
    var h = v;
    h ^= h >> 16u;
    h *= 0x21F0AAADu;
    h ^= h >> 15u;
    h *= 0x735A2D97u;
    h ^= h >> 15u;
    return h;
}

//// dropout
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = (wid.y * cfg.gx + wid.x) * 256u + lid;
    if (i >= cfg.n) {
        return;
    }
    let bits = mix32(mix32((cfg.offset + i) ^ cfg.key) + cfg.key);
    y[cfg.y_off + i] = scalar(select(0.0, f32(x[cfg.x_off + i]) * cfg.scale, bits >= cfg.threshold));
}

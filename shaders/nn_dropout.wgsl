// Counter-based dropout (rumus_contracts/ops/nn.py): element i is kept by dropout_hash.wgsl's hash of
// counter offset + i, so a seed gives the same mask on every backend. nn_dropout.py puts grid.wgsl (the
// launch, `main`) and dropout_hash.wgsl in front.
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

//// dropout
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    let keep = dropout_keep(cfg.offset + i, cfg.key, cfg.threshold);
    y[cfg.y_off + i] = scalar(select(0.0, f32(x[cfg.x_off + i]) * cfg.scale, keep));
}

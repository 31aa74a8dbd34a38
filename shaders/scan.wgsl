// cumsum / cumprod along one dim of a contiguous [outer, n, inner] tensor: one invocation per row walks it
// in order, so every prefix is the sequential sum or product (no doubling scan, which loses a small value
// next to a large one, and turns 0 * 1e30 * 1e30 into NaN); scan.py launches it with grid.wgsl's `main`.
alias scalar = f32;

struct Config {
    n: u32,                 // rows: outer * inner
    gx: u32,
    len: u32,               // elements per row
    inner: u32,
    x_off: u32,
    y_off: u32,
}

//// cumsum
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(r: u32) {
    let base = (r / cfg.inner) * cfg.len * cfg.inner + r % cfg.inner;
    var acc = 0.0;
    for (var i = 0u; i < cfg.len; i++) {
        let at = base + i * cfg.inner;
        acc = acc + f32(x[cfg.x_off + at]);
        y[cfg.y_off + at] = scalar(acc);
    }
}

//// cumprod
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(r: u32) {
    let base = (r / cfg.inner) * cfg.len * cfg.inner + r % cfg.inner;
    var acc = 1.0;
    for (var i = 0u; i < cfg.len; i++) {
        let at = base + i * cfg.inner;
        acc = acc * f32(x[cfg.x_off + at]);
        y[cfg.y_off + at] = scalar(acc);
    }
}

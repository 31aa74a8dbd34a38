// im2col / col2im around the tiled GEMM (gemm.wgsl) for conv2d and its backward ops.
// Column row r = (c * kh + i) * kw + j (channel c of all groups, kernel offset (i, j)), so a group's
// rows are contiguous; element l = oh * wo + ow of row r of sample s lives at s * sn + r * sr + l:
// per sample (sn = rows * L, sr = L) or channel-major (sn = L, sr = samples * L).
// nn_conv.py puts grid.wgsl (the launch, `main`), exact_div.wgsl and conv_config.wgsl (the uniform; a_off:
// the element offset of the chunk's first sample in x or gx) in front; each kernel is a `run`.
alias scalar = f32;

//// im2col
// one invocation per (sample, column row, output row): x at the kernel offset, or 0 in the padding
@group(0) @binding(0) var<storage, read_write> cols: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(e: u32) {
    let ho = u32(cfg.ho);
    let rows = cfg.c * u32(cfg.kh * cfg.kw);
    let q = e / ho;
    let oh = i32(e - q * ho);
    let s = q / rows;
    let r = q - s * rows;
    let taps = u32(cfg.kh * cfg.kw);
    let ch = r / taps;
    let tap = i32(r - ch * taps);
    let i = tap / cfg.kw;
    let j = tap - i * cfg.kw;
    let ih = oh * cfg.sh - cfg.ph + i * cfg.dh;
    let dst = s * cfg.sn + r * cfg.sr + u32(oh * cfg.wo);
    if (ih < 0 || ih >= cfg.h) {
        for (var ow = 0u; ow < u32(cfg.wo); ow++) {
            cols[dst + ow] = scalar(0.0);
        }
        return;
    }
    let src = cfg.a_off + ((s * cfg.c + ch) * u32(cfg.h) + u32(ih)) * u32(cfg.w);
    var iw = j * cfg.dw - cfg.pw;
    for (var ow = 0u; ow < u32(cfg.wo); ow++) {
        var v = scalar(0.0);
        if (iw >= 0 && iw < cfg.w) {
            v = x[src + u32(iw)];
        }
        cols[dst + ow] = v;
        iw += cfg.sw;
    }
}

//// col2im
// one invocation per input element: the sum of the column entries that read it
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read> cols: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(e: u32) {
    let w = u32(cfg.w);
    let qw = e / w;
    let iw = i32(e - qw * w);
    let qh = qw / u32(cfg.h);
    let ih = i32(qw - qh * u32(cfg.h));
    let s = qh / cfg.c;
    let ch = qh - s * cfg.c;
    let base = s * cfg.sn;
    var acc = 0.0;
    for (var i = 0; i < cfg.kh; i++) {
        let oh = exact_div(ih + cfg.ph - i * cfg.dh, cfg.sh);
        if (oh < 0 || oh >= cfg.ho) {
            continue;
        }
        let row = (ch * u32(cfg.kh) + u32(i)) * u32(cfg.kw);
        for (var j = 0; j < cfg.kw; j++) {
            let ow = exact_div(iw + cfg.pw - j * cfg.dw, cfg.sw);
            if (ow < 0 || ow >= cfg.wo) {
                continue;
            }
            acc += f32(cols[base + (row + u32(j)) * cfg.sr + u32(oh * cfg.wo + ow)]);
        }
    }
    gx[cfg.a_off + e] = scalar(acc);
}

// im2col / col2im around the tiled GEMM (gemm.wgsl) for conv2d and its backward ops.
// Column row r = (c * kh + i) * kw + j (channel c of all groups, kernel offset (i, j)), so a group's
// rows are contiguous; element l = oh * wo + ow of row r of sample s lives at s * sn + r * sr + l:
// per sample (sn = rows * L, sr = L) or channel-major (sn = L, sr = samples * L).
alias scalar = f32;

struct Config {
    n: u32,
    gx: u32,
    c: u32,
    h: i32,
    w: i32,
    kh: i32,
    kw: i32,
    sh: i32,
    sw: i32,
    ph: i32,
    pw: i32,
    dh: i32,
    dw: i32,
    ho: i32,
    wo: i32,
    sn: u32,
    sr: u32,
    x_off: u32,             // element offset of the chunk's first sample in x (im2col) / gx (col2im)
}

fn item(lid: u32, wid: vec3<u32>) -> u32 {
    return (wid.y * cfg.gx + wid.x) * 256u + lid;
}

//// im2col
// one invocation per column element: x at the kernel offset, or 0 in the padding
@group(0) @binding(0) var<storage, read_write> cols: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let e = item(lid, wid);
    if (e >= cfg.n) {
        return;
    }
    let len = u32(cfg.ho * cfg.wo);
    let rows = cfg.c * u32(cfg.kh * cfg.kw);
    let l = e % len;
    let q = e / len;
    let r = q % rows;
    let s = q / rows;
    let ch = r / u32(cfg.kh * cfg.kw);
    let i = i32(r / u32(cfg.kw)) % cfg.kh;
    let j = i32(r % u32(cfg.kw));
    let ih = i32(l) / cfg.wo * cfg.sh - cfg.ph + i * cfg.dh;
    let iw = i32(l) % cfg.wo * cfg.sw - cfg.pw + j * cfg.dw;
    var v = scalar(0.0);
    if (ih >= 0 && ih < cfg.h && iw >= 0 && iw < cfg.w) {
        v = x[cfg.x_off + ((s * cfg.c + ch) * u32(cfg.h) + u32(ih)) * u32(cfg.w) + u32(iw)];
    }
    cols[s * cfg.sn + r * cfg.sr + l] = v;
}

//// col2im
// one invocation per input element: the sum of the column entries that read it
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read> cols: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let e = item(lid, wid);
    if (e >= cfg.n) {
        return;
    }
    let plane = u32(cfg.h * cfg.w);
    let pos = i32(e % plane);
    let ih = pos / cfg.w;
    let iw = pos % cfg.w;
    let q = e / plane;
    let ch = q % cfg.c;
    let s = q / cfg.c;
    var acc = 0.0;
    for (var i = 0; i < cfg.kh; i++) {
        let t = ih + cfg.ph - i * cfg.dh;
        if (t < 0 || t % cfg.sh != 0 || t / cfg.sh >= cfg.ho) {
            continue;
        }
        for (var j = 0; j < cfg.kw; j++) {
            let u = iw + cfg.pw - j * cfg.dw;
            if (u < 0 || u % cfg.sw != 0 || u / cfg.sw >= cfg.wo) {
                continue;
            }
            let r = (ch * u32(cfg.kh) + u32(i)) * u32(cfg.kw) + u32(j);
            acc += f32(cols[s * cfg.sn + r * cfg.sr + u32(t / cfg.sh * cfg.wo + u / cfg.sw)]);
        }
    }
    gx[cfg.x_off + e] = scalar(acc);
}

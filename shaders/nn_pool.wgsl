// 2-D max / avg pooling over planes [H, W] (N * C planes), PyTorch's window rules as in
// csrc/internal/nn_conv_impl.h. One invocation per output element (forward) or per input element
// (backward: it gathers from the windows that cover it, in the CPU kernel's order, so no atomics).
// nn_pool.py puts grid.wgsl (the launch, `main`), exact_div.wgsl and conv_config.wgsl (the uniform, the
// conv kernels' window fields plus three of pooling's own) in front; each kernel is a `run`.
alias scalar = f32;

// Item i of a kernel that walks planes of h x w positions (forward: outputs, backward: inputs): its
// plane and its (row, column) in that plane.
struct PlanePos {
    plane: u32,
    row: i32,
    col: i32,
}

fn plane_pos(i: u32, h: i32, w: i32) -> PlanePos {
    let per = u32(h * w);
    let plane = i / per;
    let at = i32(i - plane * per);
    let r = at / w;
    return PlanePos(plane, r, at - r * w);
}

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

struct Window {
    h0: i32,
    h1: i32,
    w0: i32,
    w1: i32,
    div: f32,
}

// avg_pool2d's window: clipped to the padded input for the divisor, to the input for the sum.
fn avg_window(oh: i32, ow: i32) -> Window {
    let hs = oh * cfg.sh - cfg.ph;
    let ws = ow * cfg.sw - cfg.pw;
    let he = min(hs + cfg.kh, cfg.h + cfg.ph);
    let we = min(ws + cfg.kw, cfg.w + cfg.pw);
    let pool = (he - hs) * (we - ws);
    var win = Window(max(hs, 0), min(he, cfg.h), max(ws, 0), min(we, cfg.w), 1.0);
    if (cfg.divisor > 0) {
        win.div = f32(cfg.divisor);
    } else if (cfg.include_pad != 0u) {
        win.div = f32(pool);
    } else {
        win.div = f32((win.h1 - win.h0) * (win.w1 - win.w0));
    }
    return win;
}

//// window_max
// (needs a binding `x`)
struct Best {
    idx: i32,               // row-major index in the plane, -1 for a window without elements
    v: f32,
}

// The window's maximum and its first position (a later element wins only if greater or NaN).
fn window_max(base: u32, oh: i32, ow: i32) -> Best {
    var best = Best(-1, bitcast<f32>(cfg.ninf));
    let h0 = oh * cfg.sh - cfg.ph;
    let w0 = ow * cfg.sw - cfg.pw;
    for (var i = 0; i < cfg.kh; i++) {
        let ih = h0 + i * cfg.dh;
        if (ih < 0 || ih >= cfg.h) {
            continue;
        }
        for (var j = 0; j < cfg.kw; j++) {
            let iw = w0 + j * cfg.dw;
            if (iw < 0 || iw >= cfg.w) {
                continue;
            }
            let v = f32(x[base + u32(ih * cfg.w + iw)]);
            if (best.idx < 0 || v > best.v || is_nan(v)) {
                best = Best(ih * cfg.w + iw, v);
            }
        }
    }
    return best;
}

// the window of output item i
fn window_max_at(i: u32) -> Best {
    let o = plane_pos(i, cfg.ho, cfg.wo);
    return window_max(cfg.a_off + o.plane * u32(cfg.h * cfg.w), o.row, o.col);
}

//// max
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    y[cfg.out_off + i] = scalar(window_max_at(i).v);
}

//// max_index
// the backward's first pass: each window's argmax (row-major index in its plane)
@group(0) @binding(0) var<storage, read_write> idx: array<i32>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    idx[i] = window_max_at(i).idx;
}

//// max_backward
// the backward's second pass: the argmaxes from max_index's scratch buffer
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read> g: array<scalar>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<uniform> cfg: Config;

fn window_argmax(plane: u32, o: u32, oh: i32, ow: i32) -> i32 {
    return idx[o];
}

//// max_backward_direct
// one pass for windows that do not overlap (at most one covers each input element): its argmax found
// again here from x (no argmax buffer)
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read> g: array<scalar>;
@group(0) @binding(2) var<storage, read> x: array<scalar>;
@group(0) @binding(3) var<uniform> cfg: Config;

fn window_argmax(plane: u32, o: u32, oh: i32, ow: i32) -> i32 {
    return window_max(cfg.b_off + plane * u32(cfg.h * cfg.w), oh, ow).idx;
}

//// max_gather
// gx at one input element: the grads of the windows (in row-major window order) whose argmax it is;
// `window_argmax(plane, o, oh, ow)` (the section before this one) gives output o's argmax, a row-major
// index in its plane
fn run(i: u32) {
    let p = plane_pos(i, cfg.h, cfg.w);
    let obase = p.plane * u32(cfg.ho * cfg.wo);
    var acc = 0.0;
    for (var a = cfg.kh - 1; a >= 0; a--) {         // descending kernel row: ascending window row
        let oh = exact_div(p.row + cfg.ph - a * cfg.dh, cfg.sh);
        if (oh < 0 || oh >= cfg.ho) {
            continue;
        }
        for (var b = cfg.kw - 1; b >= 0; b--) {
            let ow = exact_div(p.col + cfg.pw - b * cfg.dw, cfg.sw);
            if (ow < 0 || ow >= cfg.wo) {
                continue;
            }
            let o = obase + u32(oh * cfg.wo + ow);
            if (window_argmax(p.plane, o, oh, ow) == p.row * cfg.w + p.col) {
                acc += f32(g[cfg.a_off + o]);
            }
        }
    }
    gx[cfg.out_off + i] = scalar(acc);
}

//// avg
@group(0) @binding(0) var<storage, read_write> y: array<scalar>;
@group(0) @binding(1) var<storage, read> x: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    let o = plane_pos(i, cfg.ho, cfg.wo);
    let win = avg_window(o.row, o.col);
    let base = cfg.a_off + o.plane * u32(cfg.h * cfg.w);
    var s = 0.0;
    for (var ih = win.h0; ih < win.h1; ih++) {
        for (var iw = win.w0; iw < win.w1; iw++) {
            s += f32(x[base + u32(ih * cfg.w + iw)]);
        }
    }
    y[cfg.out_off + i] = scalar(select(0.0, s / win.div, win.h0 < win.h1 && win.w0 < win.w1));
}

//// avg_backward
@group(0) @binding(0) var<storage, read_write> gx: array<scalar>;
@group(0) @binding(1) var<storage, read> g: array<scalar>;
@group(0) @binding(2) var<uniform> cfg: Config;

fn run(i: u32) {
    let p = plane_pos(i, cfg.h, cfg.w);
    let obase = cfg.a_off + p.plane * u32(cfg.ho * cfg.wo);
    // windows [oh * sh - ph, + kh) holding row ih: oh from ceil((ih + ph - kh + 1) / sh) to (ih + ph) / sh
    let th = p.row + cfg.ph - cfg.kh + 1;
    let tw = p.col + cfg.pw - cfg.kw + 1;
    let oh0 = select(0, (th + cfg.sh - 1) / cfg.sh, th > 0);
    let ow0 = select(0, (tw + cfg.sw - 1) / cfg.sw, tw > 0);
    let oh1 = min(cfg.ho - 1, (p.row + cfg.ph) / cfg.sh);
    let ow1 = min(cfg.wo - 1, (p.col + cfg.pw) / cfg.sw);
    var acc = 0.0;
    for (var oh = oh0; oh <= oh1; oh++) {
        for (var ow = ow0; ow <= ow1; ow++) {
            let win = avg_window(oh, ow);
            if (p.row >= win.h0 && p.row < win.h1 && p.col >= win.w0 && p.col < win.w1) {
                acc += f32(g[obase + u32(oh * cfg.wo + ow)]) / win.div;
            }
        }
    }
    gx[cfg.out_off + i] = scalar(acc);
}

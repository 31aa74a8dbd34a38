// Packing float32 weights into q8 / int4 words on the GPU, byte-identical to the CPU kernels and to
// rumus_contracts/ops/quant.py (SPEC C / D). WGSL's division is only good to 2.5 ulp, its f16
// conversion rounding is unspecified and subnormals may be flushed, so every step whose rounding
// matters is done on the float's bits with integer arithmetic: division is long division rounded to
// nearest even, f16 is rounded by hand, min / max compare bit patterns. Only the int4 code's final
// `quotient + zp` is a float add, which WGSL (and Vulkan) round correctly; round() is half to even.
// Weights are read as u32 bit patterns and scales / zero points written as bit patterns. An item that
// meets a NaN or inf writes 1 to `bad` (the host reads it and raises, as the CPU kernel does).

struct Config {
    n: u32,      // items: q8 blocks (columns x blocks) or int4 (group, column) pairs
    gx: u32,
    k: u32,
    cols: u32,   // N
    size: u32,   // block or group size
    w_off: u32,
    o_off: u32,
    s_off: u32,
    z_off: u32,
}

const INF: u32 = 0x7F800000u;

// |f| (bits without the sign) as m * 2^e, m with bit 23 set (0 stays m = 0); subnormals included
struct Split {
    m: u32,
    e: i32,
}

fn split(a: u32) -> Split {
    let ex = i32((a >> 23u) & 0xFFu);
    let m = a & 0x7FFFFFu;
    if (ex == 0) {
        if (m == 0u) { return Split(0u, 0); }
        let sh = countLeadingZeros(m) - 8u;
        return Split(m << sh, -149 - i32(sh));
    }
    return Split(m | 0x800000u, ex - 150);
}

// m * 2^e (m in [2^23, 2^24)) as f32 bits; past the largest float: inf; below the normal range: 0
// (every caller's result then ends the same way: an f16 0, a range under 1e-10, a code rounded to 0)
fn join(m: u32, e: i32) -> u32 {
    let biased = e + 150;
    if (biased >= 255) { return INF; }
    if (biased <= 0) { return 0u; }
    return (u32(biased) << 23u) | (m & 0x7FFFFFu);
}

// a / b rounded to nearest even, for a >= 0 and b > 0 given as bits without the sign
fn div_rn(a: u32, b: u32) -> u32 {
    if (a >= INF) { return INF; }
    if (b >= INF) { return 0u; }
    let x = split(a);
    let y = split(b);
    if (x.m == 0u) { return 0u; }
    var r = x.m;
    var e = x.e - y.e;
    if (r < y.m) { r = r << 1u; e -= 1; }  // y.m <= r < 2 y.m: the leading quotient bit is 1
    var q = 0u;
    for (var i = 0u; i < 26u; i++) {  // 24 bits, a guard bit and one more; r != 0 is the sticky bit
        q = q << 1u;
        if (r >= y.m) { r -= y.m; q |= 1u; }
        r = r << 1u;
    }
    var m = q >> 2u;
    let rest = q & 3u;
    if (rest == 3u || (rest == 2u && (r != 0u || (m & 1u) == 1u))) { m += 1u; }
    if (m == 0x1000000u) { m = 0x800000u; e += 1; }
    return join(m, e - 23);
}

// f32 bits (>= 0, finite) -> f16 bits, rounded to nearest even (overflow: inf)
fn f16_rn(a: u32) -> u32 {
    let ex = i32((a >> 23u) & 0xFFu) - 127;
    let m = (a & 0x7FFFFFu) | select(0x800000u, 0u, ex == -127);
    var h = 0u;
    var rem = 0u;
    var half = 0u;
    if (ex >= -14) {
        h = (u32(min(ex, 16) + 15) << 10u) + ((m & 0x7FFFFFu) >> 13u);
        rem = m & 0x1FFFu;
        half = 0x1000u;
    } else {
        let s = u32(-(ex + 1));  // f16 subnormal: units of 2^-24
        if (s > 24u) { return 0u; }
        h = m >> s;
        rem = m & ((1u << s) - 1u);
        half = 1u << (s - 1u);
    }
    if (rem > half || (rem == half && (h & 1u) == 1u)) { h += 1u; }
    return min(h, 0x7C00u);
}

// a float's bits -> an integer that orders like the float (for min / max without float compares)
fn order_key(a: u32) -> u32 {
    return select(a | 0x80000000u, ~a, (a & 0x80000000u) != 0u);
}

fn finite(a: u32) -> bool {
    return (a & 0x7FFFFFFFu) < INF;
}

// round-half-even(127 |x| / absmax) for 0 < |x| <= absmax, exactly (the CPU computes it in float64,
// whose rounding never reaches a half-integer here: see quant.c)
fn q8_code(x: u32, absmax: u32) -> u32 {
    let a = split(x & 0x7FFFFFFFu);
    let b = split(absmax);
    if (a.m == 0u) { return 0u; }
    let d = u32(b.e - a.e);  // >= 0 since |x| <= absmax; from 9 on, 127 |x| / absmax < 0.5
    if (d >= 9u) { return 0u; }
    let num = 127u * a.m;
    let t = num / b.m;
    let r1 = num % b.m;
    var n = t >> d;
    if (d == 0u) {
        if (2u * r1 > b.m || (2u * r1 == b.m && (n & 1u) == 1u)) { n += 1u; }
        return n;
    }
    let low = t & ((1u << d) - 1u);
    let half = 1u << (d - 1u);
    if (low > half || (low == half && (r1 != 0u || (n & 1u) == 1u))) { n += 1u; }
    return n;
}

//// q8_pack
@group(0) @binding(0) var<storage, read_write> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> bad: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<uniform> cfg: Config;

// item i: block b of column c (quant_pack.py puts grid.wgsl, the launch, in front)
fn run(i: u32) {
    let nb = (cfg.k + cfg.size - 1u) / cfg.size;
    let c = i / nb;
    let k0 = (i % nb) * cfg.size;
    let len = min(cfg.size, cfg.k - k0);
    var absmax = 0u;
    var ok = true;
    for (var j = 0u; j < len; j++) {
        let v = w[cfg.w_off + (k0 + j) * cfg.cols + c];
        ok = ok && finite(v);
        absmax = max(absmax, v & 0x7FFFFFFFu);  // for non-negative floats, bit order is value order
    }
    if (!ok) { bad[0] = 1u; }
    let base = cfg.o_off + i * (1u + cfg.size / 4u);
    if (absmax == 0u) {
        words[base] = 0x3C00u;  // f16 1.0
    } else {
        words[base] = f16_rn(div_rn(absmax, 0x42FE0000u));  // f16(f32(absmax / 127))
    }
    for (var j4 = 0u; j4 < cfg.size / 4u; j4++) {
        var word = 0u;
        for (var e = 0u; e < 4u; e++) {
            let j = j4 * 4u + e;
            if (j < len && absmax != 0u) {
                let v = w[cfg.w_off + (k0 + j) * cfg.cols + c];
                let mag = i32(q8_code(v, absmax));
                let q = select(mag, -mag, (v & 0x80000000u) != 0u);
                word |= (u32(clamp(q, -128, 127)) & 0xFFu) << (8u * e);
            }
        }
        words[base + 1u + j4] = word;
    }
}

//// int4_pack
@group(0) @binding(0) var<storage, read_write> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> scales: array<u32>;
@group(0) @binding(2) var<storage, read_write> zeros: array<u32>;
@group(0) @binding(3) var<storage, read_write> bad: array<u32>;
@group(0) @binding(4) var<storage, read> w: array<u32>;
@group(0) @binding(5) var<uniform> cfg: Config;

// f32 bits of v / s (s > 0), with v's sign
fn signed_div(v: u32, s: u32) -> f32 {
    let q = div_rn(v & 0x7FFFFFFFu, s);
    return bitcast<f32>(q | (v & 0x80000000u));
}

// item i: group g of column c; writes the group's g/8 words (padding rows 0), its scale and zero point
fn run(i: u32) {
    let g = i / cfg.cols;
    let c = i % cfg.cols;
    let k0 = g * cfg.size;
    let k1 = min(cfg.k, k0 + cfg.size);
    var lo = w[cfg.w_off + k0 * cfg.cols + c];
    var hi = lo;
    var ok = true;
    for (var r = k0; r < k1; r++) {
        let v = w[cfg.w_off + r * cfg.cols + c];
        ok = ok && finite(v);
        if (order_key(v) < order_key(lo)) { lo = v; }
        if (order_key(v) > order_key(hi)) { hi = v; }
    }
    if (!ok) { bad[0] = 1u; }
    let range = bitcast<f32>(hi) - bitcast<f32>(lo);  // a correctly rounded float subtraction, as on the CPU
    var s = 0x3F800000u;  // 1.0 when range <= 1e-10f (0x2EDBE6FF; range >= 0, so bits order like values)
    if (bitcast<u32>(range) > 0x2EDBE6FFu) { s = div_rn(bitcast<u32>(range), 0x41700000u); }  // range / 15
    let zp = clamp(round(signed_div(lo ^ 0x80000000u, s)), 0.0, 15.0);
    scales[cfg.s_off + g * cfg.cols + c] = s;
    zeros[cfg.z_off + g * cfg.cols + c] = select(bitcast<u32>(zp), 0u, zp == 0.0);  // never -0.0
    for (var r8 = k0; r8 < k0 + cfg.size; r8 += 8u) {
        var word = 0u;
        for (var e = 0u; e < 8u; e++) {
            if (r8 + e < k1) {
                let q = clamp(round(signed_div(w[cfg.w_off + (r8 + e) * cfg.cols + c], s) + zp), 0.0, 15.0);
                word |= u32(q) << (4u * e);
            }
        }
        words[cfg.o_off + (r8 / 8u) * cfg.cols + c] = word;
    }
}

// bfloat16 stored as 16-bit words, two per u32 (element i in the low half of word i/2 when i is even).
// Math is f32; these convert exactly as the CPU backend does (csrc/internal/half.h): bfloat16 -> f32
// is a shift, f32 -> bfloat16 rounds to nearest even and a NaN stays NaN (quiet bit set).

fn bf16_to_f32(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

fn bf16_from_bits(x: u32) -> u32 {
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

fn f32_to_bf16(v: f32) -> u32 {
    return bf16_from_bits(bitcast<u32>(v));
}

// An integer magnitude m (with a sign) -> bfloat16, rounded once: m is first narrowed to 24 bits
// rounding to odd (inexact results keep a sticky last bit), which a later round to 8 bits cannot
// double-round; `scale` multiplies by 2^scale (exact).
fn bf16_from_mag(m: u32, negative: bool, scale: u32) -> u32 {
    var kept = m;
    var shift = scale;
    if (m >= 0x1000000u) {
        let drop = 8u - countLeadingZeros(m);
        kept = (m >> drop) | select(0u, 1u, (m & ((1u << drop) - 1u)) != 0u);
        shift += drop;
    }
    let f = ldexp(f32(kept), i32(shift));
    return f32_to_bf16(select(f, -f, negative));
}

fn bf16_from_i32(v: i32) -> u32 {
    return bf16_from_mag(select(u32(v), 0u - bitcast<u32>(v), v < 0), v < 0, 0u);
}

fn bf16_from_i64(v: vec2<u32>) -> u32 {
    let m = i64_abs(v);  // -2^63 stays 0x80000000_00000000, its magnitude as unsigned
    let neg = i64_is_neg(v);
    if (m.y == 0u) {
        return bf16_from_mag(m.x, neg, 0u);
    }
    // the top 32 significant bits, the dropped low bits folded into a sticky bit
    let s = 32u - countLeadingZeros(m.y);  // 1..32
    var top = m.y;
    var low_dropped = m.x;
    if (s < 32u) {
        top = (m.y << (32u - s)) | (m.x >> s);
        low_dropped = m.x & ((1u << s) - 1u);
    }
    return bf16_from_mag(top | select(0u, 1u, low_dropped != 0u), neg, s);
}

// int64 emulated as vec2<u32>(low word, high word): two's complement, the storage layout of a
// little-endian int64, so int64 tensors read back as numpy int64 without conversion.

fn i64_from_i32(x: i32) -> vec2<u32> {
    return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0));
}

fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn i64_neg(a: vec2<u32>) -> vec2<u32> {
    return i64_add(~a, vec2<u32>(1u, 0u));
}

fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return i64_add(a, i64_neg(b));
}

// full 64-bit product of two u32 from 16-bit halves
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// the low 64 bits of the product are the same for signed and unsigned operands
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = u32_mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn i64_is_neg(a: vec2<u32>) -> bool {
    return bitcast<i32>(a.y) < 0;
}

fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool {
    return all(a == b);
}

fn i64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(a, b));
}

fn i64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(b, a));
}

fn i64_abs(a: vec2<u32>) -> vec2<u32> {
    return select(a, i64_neg(a), i64_is_neg(a));
}

fn i64_fits_i32(a: vec2<u32>) -> bool {
    return a.y == select(0u, 0xffffffffu, bitcast<i32>(a.x) < 0);
}

fn i64_to_f32(a: vec2<u32>) -> f32 {
    if (i64_fits_i32(a)) {
        return f32(bitcast<i32>(a.x));
    }
    let m = i64_abs(a);
    let r = f32(m.y) * 4294967296.0 + f32(m.x);
    return select(r, -r, i64_is_neg(a));
}

// truncation toward zero, saturating like WGSL's f32 -> i32 conversion
fn i64_from_f32(x: f32) -> vec2<u32> {
    let t = trunc(x);
    if (abs(t) < 2147483648.0) {
        return i64_from_i32(i32(t));
    }
    if (t >= 9.223372e18) {
        return vec2<u32>(0xffffffffu, 0x7fffffffu);
    }
    if (t <= -9.223372e18) {
        return vec2<u32>(0u, 0x80000000u);
    }
    let hi = floor(t / 4294967296.0);
    return vec2<u32>(u32(t - hi * 4294967296.0), bitcast<u32>(i32(hi)));
}

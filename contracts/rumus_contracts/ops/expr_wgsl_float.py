"""The f32 math the WGSL renderer calls instead of WGSL's built-ins, written out so the edges hold.

Vulkan's precision rules let a driver compute exp, log, tanh, atan2 and pow loosely (lavapipe's tanh(1e-10)
was 2.98e-8, log1p(1e-7) 19% off, exp(-88) flushed to 0, atan2(-0, -0) -2.356), fold `x != x` to false and
return either operand of min/max on NaN. These helpers give the C99 / IEEE 754 answers the CPU backend's
libm gives (NaN tested on the bits, signed zeros kept, subnormal results built from their bits so a device
that flushes subnormals in arithmetic still writes them), to float32 accuracy:
- exp_f: Cody-Waite reduction by ln 2, a degree-7 polynomial on |r| <= ln2 / 2, the power of two put in
  the exponent bits (a subnormal result is rounded as an integer count of 2^-149);
- log_f: exponent and mantissa from the bits (subnormals normalized as integers), then
  2 atanh((m - 1) / (m + 1)) on m in [sqrt(1/2), sqrt(2));
- log1p_f: the same series on s = x / (2 + x) near 0 (no compensated 1 + x, which compilers fold away);
- expm1_f: Taylor to x^9 below |x| = 0.5, exp_f(x) - 1 above; tanh_f from expm1_f(2|x|);
- erf_f / erfc_f: Taylor series below |x| = 0.84375, Numerical Recipes' erfc (fractional error 1.2e-7)
  above, so erfc's tail (and gelu's, through phi) keeps its relative accuracy;
- fmod_f: exact (the integer long division of musl's fmodf), so fmod(1e10, 0.003) is not 0;
- sin_f / cos_f: Cephes' sinf/cosf polynomials on [-pi/4, pi/4] after an exact Payne-Hanek reduction in
  integers (the product of the significand with a 96-bit window of 2/pi's bits), so sin(1e10) is right;
- atan2_f: Cephes' atanf with C99's quadrant, zero and infinity cases; pow_f: C99's special cases, an
  exact product for small integer exponents, exp_f(y * log_f(|x|)) otherwise.
"""

from __future__ import annotations

# NaN and infinity from private variables: WGSL const-evaluates bitcast<f32>(constant bits), and Tint (Dawn)
# rejects a constant that is not a finite f32
_NAN = "nan_f()"
_INF = "inf_f()"

FLOAT_HELPERS: dict[str, str] = {
    "nan_f": "\nvar<private> nan_bits_f: u32 = 0x7fc00000u;\nfn nan_f() -> f32 { return bitcast<f32>(nan_bits_f); }",
    "inf_f": "\nvar<private> inf_bits_f: u32 = 0x7f800000u;\nfn inf_f() -> f32 { return bitcast<f32>(inf_bits_f); }",
    "signbit_f": "\nfn signbit_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }",
    # select(0.0, a, c) for a negative constant a, as bits: lavapipe compiles select(0.0, -1.0, c) as
    # -f32(c), a -0.0 where c is false; the mask (a no-op) keeps the compiler from seeing that pattern
    "zero_or_f": """
fn zero_or_f(c: bool, a: f32) -> f32 {
    let bits = select(0u, bitcast<u32>(a), c);
    return bitcast<f32>(bits & select(0u, 0xffffffffu, bits != 0u));
}""",
    "eq_f": """
fn eq_f(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a == b; }""",
    "lt_f": """
fn lt_f(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a < b; }""",
    "le_f": """
fn le_f(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a <= b; }""",
    # NaN propagates from either operand (numpy's maximum / minimum, PyTorch's clamp)
    "max_f": f"""
fn max_f(a: f32, b: f32) -> f32 {{
    if (isnan_f(a) || isnan_f(b)) {{ return {_NAN}; }}
    return select(a, b, a < b);  // equal operands (-0, +0) give the first, as C++'s std::max
}}""",
    "min_f": f"""
fn min_f(a: f32, b: f32) -> f32 {{
    if (isnan_f(a) || isnan_f(b)) {{ return {_NAN}; }}
    return select(a, b, b < a);
}}""",
    "exp_f": f"""
fn exp_f(x: f32) -> f32 {{
    if (isnan_f(x)) {{ return x; }}
    if (x > 88.72284) {{ return {_INF}; }}
    if (x < -103.972084) {{ return 0.0; }}  // below half the smallest subnormal
    let n = round(x * 1.442695040888963);
    let r = (x - n * 0.693145751953125) - n * 1.4286068203094173e-06;  // ln 2 as 16 bits + the rest
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664
        + r * (0.008333333333333333 + r * (0.001388888888888889 + r * 0.0001984126984126984))))));
    let k = i32(n);
    if (k > 127) {{  // doubled on the bits: a compiler may fold (p * 2^127) * 2 into p * inf
        let q = bitcast<u32>(p * pow2_f(127));
        if (q >= 0x7f000000u) {{ return {_INF}; }}
        return bitcast<f32>(q + 0x00800000u);
    }}
    if (k < -126) {{ return bitcast<f32>(u32(round(p * pow2_f(k + 149)))); }}  // a subnormal: count 2^-149s
    return p * pow2_f(k);
}}""",
    # 2^k for k in [-126, 127], from its exponent bits (ldexp near the ends is not to be trusted either)
    "pow2_f": "\nfn pow2_f(k: i32) -> f32 { return bitcast<f32>(u32(k + 127) << 23u); }",
    "log_f": f"""
fn log_f(x: f32) -> f32 {{
    var bits = bitcast<u32>(x);
    if (isnan_f(x) || bits > 0x80000000u) {{ return {_NAN}; }}  // NaN, or below zero
    if ((bits & 0x7fffffffu) == 0u) {{ return -{_INF}; }}
    if (bits == 0x7f800000u) {{ return x; }}
    var k = i32(bits >> 23u) - 127;
    if ((bits >> 23u) == 0u) {{  // subnormal: bring the leading 1 to bit 23 as an integer
        let shift = countLeadingZeros(bits) - 8u;
        bits = bits << shift;
        k = -126 - i32(shift);
    }}
    var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
    if (m > 1.4142135) {{
        m = m * 0.5;
        k = k + 1;
    }}
    let kf = f32(k);
    return kf * 0.693145751953125 + (log_series_f((m - 1.0) / (m + 1.0)) + kf * 1.4286068203094173e-06);
}}""",
    # log((1 + s) / (1 - s)) = 2 atanh(s) for |s| <= 0.1716 (the first term left out is below 2e-13)
    "log_series_f": """
fn log_series_f(s: f32) -> f32 {
    let z = s * s;
    return 2.0 * s * (1.0 + z * (0.3333333333333333 + z * (0.2 + z * (0.14285714285714285
        + z * (0.1111111111111111 + z * (0.09090909090909091 + z * 0.07692307692307693))))));
}""",
    # no compensated 1 + x here: a compiler may fold (x - ((1 + x) - 1)) to 0 (lavapipe's does), so near 0
    # the series runs on s = x / (2 + x) itself, and log_f(1 + x) only where 1 + x is far from 1
    "log1p_f": f"""
fn log1p_f(x: f32) -> f32 {{
    if (isnan_f(x) || x < -1.0) {{ return {_NAN}; }}
    if (x == -1.0) {{ return -{_INF}; }}
    if (isinf_f(x)) {{ return x; }}
    if (x > -0.29289323 && x < 0.41421357) {{
        let s = x / (2.0 + x);
        return log_series_f(s);
    }}
    return log_f(1.0 + x);
}}""",
    "expm1_f": """
fn expm1_f(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0
            + x * (1.0 / 5040.0 + x * (1.0 / 40320.0 + x * (1.0 / 362880.0)))))))));
    }
    return exp_f(x) - 1.0;
}""",
    "tanh_f": """
fn tanh_f(x: f32) -> f32 {
    if (isnan_f(x)) { return x; }
    let a = abs(x);
    var t = 1.0;
    if (a < 10.0) {
        let e = expm1_f(2.0 * a);
        t = e / (e + 2.0);
    }
    return select(t, -t, signbit_f(x));
}""",
    "sigmoid_f": "\nfn sigmoid_f(x: f32) -> f32 { return 1.0 / (1.0 + exp_f(-x)); }",
    "erf_small_f": """
// erf by its Taylor series, for |x| < 0.84375 (the first term left out is below 3e-11)
fn erf_small_f(x: f32) -> f32 {
    let z = x * x;
    return 1.1283791670955126 * x * (1.0 + z * (-0.3333333333333333 + z * (0.1 + z * (-0.023809523809523808
        + z * (0.004629629629629629 + z * (-0.0007575757575757576 + z * (0.00010683760683760684
        + z * (-1.3227513227513228e-05 + z * (1.4589169000933706e-06 + z * (-1.4503852223150468e-07
        + z * 1.3122532963802806e-08))))))))));
}""",
    "erfc_tail_f": """
// erfc for z >= 0.84375: Numerical Recipes' erfcc (fractional error below 1.2e-7)
fn erfc_tail_f(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp_f(-z * z + p);
}""",
    "erf_f": """
fn erf_f(x: f32) -> f32 {
    if (isnan_f(x)) { return x; }
    let a = abs(x);
    if (a < 0.84375) { return erf_small_f(x); }
    let r = 1.0 - erfc_tail_f(a);
    return select(r, -r, signbit_f(x));
}""",
    "erfc_f": """
fn erfc_f(x: f32) -> f32 {
    if (isnan_f(x)) { return x; }
    let a = abs(x);
    if (a < 0.84375) { return 1.0 - erf_small_f(x); }
    let t = erfc_tail_f(a);
    return select(t, 2.0 - t, x < 0.0);
}""",
    "fmod_f": f"""
// C's fmod, exact: the remainder of the integer significands, one quotient bit per exponent step
fn fmod_f(a: f32, b: f32) -> f32 {{
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let sign = ua & 0x80000000u;
    let xa = ua & 0x7fffffffu;
    let xb = ub & 0x7fffffffu;
    if (xa >= 0x7f800000u || xb > 0x7f800000u || xb == 0u) {{ return {_NAN}; }}
    if (xa < xb) {{ return a; }}  // |a| < |b|, b infinite included
    var ea = i32(xa >> 23u);
    var eb = i32(xb >> 23u);
    var ma = xa & 0x007fffffu;
    var mb = xb & 0x007fffffu;
    if (ea == 0) {{  // subnormal: normalized as an integer
        let s = countLeadingZeros(ma) - 8u;
        ma = ma << s;
        ea = 1 - i32(s);
    }} else {{
        ma = ma | 0x00800000u;
    }}
    if (eb == 0) {{  // subnormal: normalized as an integer
        let s = countLeadingZeros(mb) - 8u;
        mb = mb << s;
        eb = 1 - i32(s);
    }} else {{
        mb = mb | 0x00800000u;
    }}
    for (; ea > eb; ea--) {{
        if (ma >= mb) {{ ma = ma - mb; }}
        if (ma == 0u) {{ return bitcast<f32>(sign); }}
        ma = ma << 1u;
    }}
    if (ma >= mb) {{ ma = ma - mb; }}
    if (ma == 0u) {{ return bitcast<f32>(sign); }}
    for (; ma < 0x00800000u; ea--) {{ ma = ma << 1u; }}
    if (ea > 0) {{ return bitcast<f32>(sign | (u32(ea) << 23u) | (ma & 0x007fffffu)); }}
    return bitcast<f32>(sign | (ma >> u32(1 - ea)));  // a subnormal remainder, exact
}}""",
    "mul_wide_u32": """
// the 64-bit product of two u32 as (low, high) words
fn mul_wide_u32(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}""",
    "trig_reduce_f": """
// |x| >= pi/4, finite: (r, quadrant) with x = quadrant * pi/2 + r, |r| <= pi/4. x = m 2^e (m the 24-bit
// significand); the bits of 2/pi above position e - 2 only add multiples of 4 to x 2/pi, so a 96-bit window
// W of them from there on gives x 2/pi mod 4 as the top bits of m W, exactly, with 62 bits of fraction.
fn trig_reduce_f(ax: f32) -> vec2<f32> {
    var w = array<u32, 8>(0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
                          0xfe5163abu, 0xdebbc561u);
    let bits = bitcast<u32>(ax);
    let e = i32(bits >> 23u) - 150;
    let m = (bits & 0x007fffffu) | 0x00800000u;
    let p = u32(max(0, e - 2));
    let j = p / 32u;
    let s = p % 32u;
    var w2 = w[j];
    var w1 = w[j + 1u];
    var w0 = w[j + 2u];
    if (s != 0u) {
        w2 = (w[j] << s) | (w[j + 1u] >> (32u - s));
        w1 = (w[j + 1u] << s) | (w[j + 2u] >> (32u - s));
        w0 = (w[j + 2u] << s) | (w[j + 3u] >> (32u - s));
    }
    let a0 = mul_wide_u32(m, w0);
    let a1 = mul_wide_u32(m, w1);
    let a2 = mul_wide_u32(m, w2);
    let p1 = a0.y + a1.x;
    let c1 = select(0u, 1u, p1 < a0.y);
    let s2 = a1.y + a2.x;
    let c2 = select(0u, 1u, s2 < a1.y);
    let p2 = s2 + c1;
    let c3 = select(0u, 1u, p2 < s2);
    let p3 = a2.y + c2 + c3;
    // m W / 2^t is x 2/pi mod 4, t = 96 - (e - p) in [94, 120]: shift right by t - 64 (30 .. 56)
    var limbs = vec4<u32>(a0.x, p1, p2, p3);
    var k = u32(96 - (e - i32(p))) - 64u;
    if (k >= 32u) {
        limbs = vec4<u32>(limbs.y, limbs.z, limbs.w, 0u);
        k = k - 32u;
    }
    var f0 = limbs.x;
    var f1 = limbs.y;
    var q = limbs.z;
    if (k != 0u) {
        f0 = (limbs.x >> k) | (limbs.y << (32u - k));
        f1 = (limbs.y >> k) | (limbs.z << (32u - k));
        q = (limbs.z >> k) | (limbs.w << (32u - k));
    }
    var neg = false;
    if (f1 >= 0x80000000u) {  // a fraction of 1/2 or more: the next quadrant, minus the rest
        neg = true;
        q = q + 1u;
        let n0 = ~f0 + 1u;
        f1 = ~f1 + select(0u, 1u, n0 == 0u);
        f0 = n0;
    }
    let f = f32(f1) * 2.3283064365386963e-10 + f32(f0) * 5.421010862427522e-20;
    let r = f * 1.5707963267948966;
    return vec2<f32>(select(r, -r, neg), f32(q & 3u));
}""",
    "sincos_f": """
// (sin x, cos x) for finite x by quadrant: Cephes' sinf / cosf polynomials on |r| <= pi/4
fn sincos_f(x: f32) -> vec2<f32> {
    let a = abs(x);
    var red = vec2<f32>(a, 0.0);
    if (a >= 0.7853982) { red = trig_reduce_f(a); }
    let r = red.x;
    let z = r * r;
    let sr = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
    let cr = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
    let q = u32(red.y);
    var sv = sr;
    var cv = cr;
    if (q == 1u) { sv = cr; cv = -sr; }
    if (q == 2u) { sv = -sr; cv = -cr; }
    if (q == 3u) { sv = -cr; cv = sr; }
    return vec2<f32>(select(sv, -sv, signbit_f(x)), cv);
}""",
    "sin_f": f"""
fn sin_f(x: f32) -> f32 {{
    if (!isfinite_f(x)) {{ return {_NAN}; }}
    if (x == 0.0) {{ return x; }}  // keeps -0
    return sincos_f(x).x;
}}""",
    "cos_f": f"""
fn cos_f(x: f32) -> f32 {{
    if (!isfinite_f(x)) {{ return {_NAN}; }}
    return sincos_f(x).y;
}}""",
    "atan_f": """
// Cephes' atanf for x >= 0 (relative error about 1e-7)
fn atan_f(x: f32) -> f32 {
    var y = 0.0;
    var t = x;
    if (x > 2.414213562373095) {
        y = 1.5707963267948966;
        t = -1.0 / x;
    } else if (x > 0.4142135623730950) {
        y = 0.7853981633974483;
        t = (x - 1.0) / (x + 1.0);
    }
    let z = t * t;
    return y + ((((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z - 0.333329491539) * z * t + t);
}""",
    "atan2_f": f"""
fn atan2_f(y: f32, x: f32) -> f32 {{
    if (isnan_f(x) || isnan_f(y)) {{ return {_NAN}; }}
    let ay = abs(y);
    let ax = abs(x);
    var r: f32;
    if (isinf_f(ay) && isinf_f(ax)) {{
        r = 0.7853981633974483;
    }} else if (ay == 0.0 && ax == 0.0) {{
        r = 0.0;
    }} else if (ay > ax) {{
        r = 1.5707963267948966 - atan_f(ax / ay);
    }} else {{
        r = atan_f(ay / ax);
    }}
    if (signbit_f(x)) {{ r = 3.141592653589793 - r; }}
    return select(r, -r, signbit_f(y));
}}""",
    "pow_f": f"""
// C99's pow: pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN; zeros and infinities by the exponent's parity
fn pow_f(a: f32, b: f32) -> f32 {{
    if ((bitcast<u32>(b) & 0x7fffffffu) == 0u || bitcast<u32>(a) == 0x3f800000u) {{ return 1.0; }}
    if (isnan_f(a) || isnan_f(b)) {{ return {_NAN}; }}
    let ab = abs(a);
    let bi = !isinf_f(b) && trunc(b) == b;
    let odd = bi && abs(b) < 16777216.0 && fract(b * 0.5) != 0.0;
    let flip = signbit_f(a) && odd;
    if (isinf_f(b)) {{
        if (ab == 1.0) {{ return 1.0; }}
        return select(0.0, {_INF}, (ab > 1.0) == (b > 0.0));
    }}
    if (ab == 0.0 || isinf_f(a)) {{
        let big = (ab == 0.0) == (b < 0.0);
        let r = select(0.0, {_INF}, big);
        return select(r, -r, flip);
    }}
    if (signbit_f(a) && !bi) {{ return {_NAN}; }}
    var r: f32;
    if (bi && abs(b) <= 64.0) {{  // an exact-as-possible product by squaring
        var e = u32(abs(b));
        var base = ab;
        r = 1.0;
        for (; e > 0u; e = e >> 1u) {{
            if ((e & 1u) != 0u) {{ r = r * base; }}
            base = base * base;
        }}
        if (b < 0.0) {{ r = 1.0 / r; }}
    }} else {{
        r = exp_f(b * log_f(ab));
    }}
    return select(r, -r, flip);
}}""",
}

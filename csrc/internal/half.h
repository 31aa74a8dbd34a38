/* float16 and bfloat16 storage: 16-bit words converted to and from float (the compute type).

   float16 (IEEE binary16): F16C instructions when the compiler targets them (__F16C__), a portable
   bit-exact path otherwise.  Both give the same bits for every input:
   - float -> half rounds to nearest even; overflow -> +-inf, values below half the smallest subnormal
     -> +-0, subnormals exact; a NaN stays NaN with its top payload bits and the quiet bit set (what
     vcvtps2ph does);
   - half -> float is exact; a NaN keeps its payload and gets the quiet bit (what vcvtph2ps does).
   bfloat16 (the upper half of a float32): rounds to nearest even, a NaN stays NaN (quiet bit set, so a
   payload in the dropped bits can never round it into an infinity); bfloat16 -> float is a shift.
   AVX-512 BF16's vcvtneps2bf16 is deliberately not used: it treats subnormal inputs as zero (Intel SDM:
   "input denormals are always treated as zero"), so 1e-39f would become 0 instead of PyTorch's and
   ml_dtypes' 0x000b; for every other input its definition is the integer sequence below, which
   compilers vectorise (AVX2/AVX-512 integer adds and shifts) in the conversion loops.

   double -> half/bfloat16 rounds once, correctly (numpy's float64 -> float16 does; going through a
   float32 rounded to nearest would round twice): the double is first rounded to a float by
   round-to-odd, which keeps enough information for the second rounding to be the correct one.
   int64 goes the same way (rounded to odd into 53 bits first). */
#ifndef RUMUS_HALF_H
#define RUMUS_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t rumus_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float rumus_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- float16 --------------------------------------------------------------------------------- */

static inline float rumus_h2f_soft(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return rumus_f32_from_bits(sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0u));
    if (exp != 0) return rumus_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in float */
    const float v = (float)man * 5.9604644775390625e-08f;
    return rumus_f32_from_bits(sign | rumus_f32_bits(v));
}

static inline uint16_t rumus_f2h_soft(float f) {
    const uint32_t x = rumus_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN, made quiet */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (the tie above 65504), inf */
    if (ax >= 0x38800000u) {                                   /* a normal half: rebias, round 13 bits */
        uint32_t r = (ax - 0x38000000u) >> 13;
        const uint32_t rem = ax & 0x1fffu;
        r += (rem > 0x1000u) | ((rem == 0x1000u) & r);
        return (uint16_t)(sign | r);
    }
    if (ax <= 0x33000000u) return sign; /* <= 2^-25: the tie with the smallest subnormal goes to 0 */
    /* a subnormal half: the value in units of 2^-24, rounded to nearest even */
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (ax >> 23); /* 14..24 */
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    r += (rem > halfway) | ((rem == halfway) & r);
    return (uint16_t)(sign | r);
}

#if defined(__F16C__)
static inline float rumus_h2f(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t rumus_f2h(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#else
static inline float rumus_h2f(uint16_t h) { return rumus_h2f_soft(h); }
static inline uint16_t rumus_f2h(float f) { return rumus_f2h_soft(f); }
#endif

/* ---- bfloat16 -------------------------------------------------------------------------------- */

static inline float rumus_bf2f(uint16_t b) { return rumus_f32_from_bits((uint32_t)b << 16); }

static inline uint16_t rumus_f2bf(float f) {
    const uint32_t x = rumus_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- one correct rounding from wider types --------------------------------------------------- */

/* double -> float rounded to odd: inexact results get an odd last bit (never a float tie). */
static inline float rumus_f64_to_f32_odd(double d) {
    const float f = (float)d;
    const double back = (double)f;
    if (back == d || d != d) return f;
    uint32_t u = rumus_f32_bits(f);
    if (!(u & 1u)) u = (back > d) == (d > 0) ? u - 1u : u + 1u; /* step toward d (magnitude bits) */
    return rumus_f32_from_bits(u);
}

/* int64 -> double rounded to odd (bits below the 53 kept are folded into a sticky last bit). */
static inline double rumus_i64_to_f64_odd(int64_t v) {
    uint64_t u = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
    int shift = 0;
    if (u >> 53) {
        shift = 11 - __builtin_clzll(u);
        const uint64_t low = u & ((1ull << shift) - 1u);
        u = (u >> shift) | (low != 0);
    }
    const double d = ldexp((double)u, shift);
    return v < 0 ? -d : d;
}

static inline uint16_t rumus_f64_to_h(double d) { return rumus_f2h(rumus_f64_to_f32_odd(d)); }
static inline uint16_t rumus_f64_to_bf(double d) { return rumus_f2bf(rumus_f64_to_f32_odd(d)); }
static inline uint16_t rumus_i64_to_h(int64_t v) { return rumus_f64_to_h(rumus_i64_to_f64_odd(v)); }
static inline uint16_t rumus_i64_to_bf(int64_t v) { return rumus_f64_to_bf(rumus_i64_to_f64_odd(v)); }

/* Any arithmetic value -> half / bfloat16, rounded once (types of at most 24 bits are exact as float). */
#define RUMUS_TO_H(x)                                                                                   \
    _Generic((x), float: rumus_f2h, double: rumus_f64_to_h, int64_t: rumus_i64_to_h,                    \
             int32_t: rumus_i32_to_h, default: rumus_small_to_h)(x)
#define RUMUS_TO_BF(x)                                                                                  \
    _Generic((x), float: rumus_f2bf, double: rumus_f64_to_bf, int64_t: rumus_i64_to_bf,                 \
             int32_t: rumus_i32_to_bf, default: rumus_small_to_bf)(x)
static inline uint16_t rumus_i32_to_h(int32_t v) { return rumus_f64_to_h((double)v); }
static inline uint16_t rumus_i32_to_bf(int32_t v) { return rumus_f64_to_bf((double)v); }
static inline uint16_t rumus_small_to_h(int v) { return rumus_f2h((float)v); }
static inline uint16_t rumus_small_to_bf(int v) { return rumus_f2bf((float)v); }

#endif

/* Branch-free float32 exp / tanh / sigmoid that gcc vectorises (glibc's scalar expf/tanhf do not),
   accurate to about 2 ulp.  Cephes' polynomials; the result is scaled by 2^n in two halves so
   results near overflow and in the denormal range come out as IEEE arithmetic rounds them. */
#ifndef RUMUS_FASTMATH_H
#define RUMUS_FASTMATH_H

#include <stdint.h>
#include <string.h>

static inline float rumus_bits_to_float(int32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline float rumus_expf(float x) {
    /* beyond these bounds the result is 0 or inf anyway; NaN passes the comparisons untouched */
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int32_t k = (int32_t)n, h = k >> 1;
    return y * rumus_bits_to_float((h + 127) << 23) * rumus_bits_to_float((k - h + 127) << 23);
}

static inline float rumus_tanhf(float x) {
    const float ax = x < 0 ? -x : x;
    const float z = x * x;
    const float small =
        ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
         3.33332819422e-1f) * z * x + x;
    const float big = 1.0f - 2.0f / (rumus_expf(2.0f * ax) + 1.0f);
    return ax < 0.625f ? small : (x < 0 ? -big : big);
}

static inline float rumus_sigmoidf(float x) { return 1.0f / (1.0f + rumus_expf(-x)); }

static inline int32_t rumus_float_to_bits(float f) {
    int32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float rumus_logf(float x) {
    const int den = x < 1.17549435e-38f; /* denormals: scale into the normal range first */
    const float xs = den ? x * 8388608.0f : x;
    const int32_t bits = rumus_float_to_bits(xs);
    int32_t e = ((bits >> 23) & 0xff) - 126 - (den ? 23 : 0);
    float m = rumus_bits_to_float((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    const int low = m < 0.707106781186547524f;
    e = low ? e - 1 : e;
    m = low ? m + m - 1.0f : m - 1.0f;
    const float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    const float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y;
    r += 0.693359375f * fe;
    r = x < 0.0f ? __builtin_nanf("") : r;
    r = x == 0.0f ? -__builtin_inff() : r;
    r = x == __builtin_inff() ? x : r;
    return x != x ? x : r;
}

/* sin/cos for |x| <= RUMUS_TRIG_LIMIT (Cody-Waite reduction by pi/4 in three parts); callers send
   larger arguments, inf and NaN to libm. */
#define RUMUS_TRIG_LIMIT 8192.0f

static inline float rumus_trigf(float x, int cosine) {
    const float ax = x < 0 ? -x : x;
    int32_t j = (int32_t)(ax * 1.27323954473516f);
    j += j & 1;
    const float y = (float)j;
    j &= 7;
    const float r = ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
    const float z = r * r;
    const float c = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
                    0.5f * z + 1.0f;
    const float s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
    const int swap = (j == 2) | (j == 6); /* the octants where sin uses the cos polynomial and vice versa */
    float v;
    int neg;
    if (cosine) {
        v = swap ? s : c;
        neg = (j == 2) | (j == 4);
    } else {
        v = swap ? c : s;
        neg = (j >= 4) ^ (x < 0);
    }
    return neg ? -v : v;
}

#endif

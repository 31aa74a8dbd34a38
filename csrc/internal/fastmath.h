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

#endif

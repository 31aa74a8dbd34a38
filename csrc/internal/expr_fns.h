/* The function primitives of the expression table (rumus_contracts/ops/expr_lang.py), one per C type:
   rx_<fn>_<sfx>.  float32 uses the branch-free fastmath.h versions that gcc vectorises; float64 uses
   libm.  Integer // and % follow Python (floor, the divisor's sign); the core refuses integer division
   by zero before a kernel runs, the guards here only keep C from trapping (and INT_MIN / -1). */
#ifndef RUMUS_EXPR_FNS_H
#define RUMUS_EXPR_FNS_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "fastmath.h"

#define RX_INV_SQRT2 0.70710678118654752440

/* erf for float32: x * P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in float32), |error| < 5e-7. */
static inline float rx_erf_f32(float a) {
    float x = a < -4.0f ? -4.0f : a;
    x = x > 4.0f ? 4.0f : x;
    const float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return x * p / q;
}
static inline double rx_erf_f64(double x) { return erf(x); }
/* Phi(x), the standard normal CDF; float64 through erfc keeps the far left tail accurate. */
static inline float rx_phi_f32(float x) { return 0.5f * (1.0f + rx_erf_f32(x * (float)RX_INV_SQRT2)); }
static inline double rx_phi_f64(double x) { return 0.5 * erfc(-x * RX_INV_SQRT2); }

static inline float rx_exp_f32(float x) { return rumus_expf(x); }
static inline float rx_log_f32(float x) { return rumus_logf(x); }
/* sin and tanh are odd: a zero keeps its sign (the polynomials give +0 for -0) */
static inline float rx_tanh_f32(float x) { const float r = rumus_tanhf(x); return x == 0.0f ? x : r; }
static inline float rx_sigmoid_f32(float x) { return rumus_sigmoidf(x); }
static inline float rx_sin_fast_f32(float x) { const float r = rumus_trigf(x, 0); return x == 0.0f ? x : r; }
static inline float rx_cos_fast_f32(float x) { return rumus_trigf(x, 1); }
static inline float rx_sin_f32(float x) { return fabsf(x) <= RUMUS_TRIG_LIMIT ? rx_sin_fast_f32(x) : sinf(x); }
static inline float rx_cos_f32(float x) { return fabsf(x) <= RUMUS_TRIG_LIMIT ? rumus_trigf(x, 1) : cosf(x); }
static inline double rx_exp_f64(double x) { return exp(x); }
static inline double rx_log_f64(double x) { return log(x); }
static inline double rx_tanh_f64(double x) { return tanh(x); }
static inline double rx_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline double rx_sin_f64(double x) { return sin(x); }
static inline double rx_cos_f64(double x) { return cos(x); }

/* the rest map onto libm the same way for both float types */
#define RX_LIBM(sfx, T, F)                                                                              \
    static inline T rx_log1p_##sfx(T x) { return log1p##F(x); }                                         \
    static inline T rx_expm1_##sfx(T x) { return expm1##F(x); }                                         \
    static inline T rx_sqrt_##sfx(T x) { return sqrt##F(x); }                                           \
    static inline T rx_rsqrt_##sfx(T x) { return (T)1 / sqrt##F(x); }                                  \
    static inline T rx_floor_##sfx(T x) { return floor##F(x); }                                         \
    static inline T rx_ceil_##sfx(T x) { return ceil##F(x); }                                           \
    static inline T rx_trunc_##sfx(T x) { return trunc##F(x); }                                         \
    static inline T rx_rint_##sfx(T x) { return rint##F(x); } /* ties to even (default rounding) */     \
    static inline T rx_pow_##sfx(T x, T y) { return pow##F(x, y); }                                     \
    static inline T rx_fmod_##sfx(T x, T y) { return fmod##F(x, y); }                                   \
    static inline T rx_atan2_##sfx(T x, T y) { return atan2##F(x, y); }                                 \
    static inline T rx_abs_##sfx(T x) { return fabs##F(x); } /* abs(-0.0) is +0.0 */                   \
    /* NaN propagates from either operand (numpy's maximum / minimum: softplus(NaN) is NaN) */         \
    static inline T rx_max_##sfx(T x, T y) { return (x > y || x != x) ? x : y; }                       \
    static inline T rx_min_##sfx(T x, T y) { return (x < y || x != x) ? x : y; }                       \
    static inline int rx_isnan_##sfx(T x) { return x != x; }                                            \
    static inline int rx_isinf_##sfx(T x) { return x == (T)INFINITY || x == -(T)INFINITY; }             \
    static inline int rx_isfinite_##sfx(T x) { return rx_abs_##sfx(x) <= (T)MAXV; }                    \
    static inline int rx_truthy_##sfx(T x) { return x != 0; }                                           \
    /* Python's floor division and modulo on floats (numpy's and PyTorch's algorithm) */                \
    static inline T rx_mod_##sfx(T a, T b) {                                                            \
        T m = fmod##F(a, b);                                                                            \
        return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;                                            \
    }                                                                                                   \
    static inline T rx_floordiv_##sfx(T a, T b) {                                                       \
        if (b == 0) return a / b;                                                                       \
        const T m = fmod##F(a, b);                                                                      \
        T d = (a - m) / b;                                                                              \
        if (m != 0 && ((b < 0) != (m < 0))) d -= 1;                                                     \
        if (d == 0) return copysign##F((T)0, a / b);                                                    \
        T f = floor##F(d);                                                                              \
        return d - f > (T)0.5 ? f + 1 : f;                                                              \
    }
#define MAXV FLT_MAX
RX_LIBM(f32, float, f)
#undef MAXV
#define MAXV DBL_MAX
RX_LIBM(f64, double, )
#undef MAXV

/* integers: C's / and % truncate; fix toward floor.  b == 0 and (signed) b == -1 never trap. */
#define RX_MINUS_ONE(T, b) ((T)-1 < (T)0 && (b) == (T)-1)
#define RX_INT(sfx, T, ...)                                                                             \
    static inline T rx_abs_##sfx(T x) { return x < 0 ? (T)-x : x; }                                    \
    static inline T rx_max_##sfx(T x, T y) { return x > y ? x : y; }                                    \
    static inline T rx_min_##sfx(T x, T y) { return x < y ? x : y; }                                    \
    static inline int rx_isnan_##sfx(T x) { (void)x; return 0; }                                        \
    static inline int rx_truthy_##sfx(T x) { return x != 0; }                                           \
    static inline T rx_fmod_##sfx(T a, T b) { return (b == 0 || RX_MINUS_ONE(T, b)) ? (T)0 : (T)(a % b); } \
    static inline T rx_mod_##sfx(T a, T b) {                                                            \
        const T m = rx_fmod_##sfx(a, b);                                                                \
        return (m != 0 && ((b < 0) != (m < 0))) ? (T)(m + b) : m;                                       \
    }                                                                                                   \
    static inline T rx_floordiv_##sfx(T a, T b) {                                                       \
        if (b == 0) return 0;                                                                           \
        if (RX_MINUS_ONE(T, b)) return (T)(0 - (uint64_t)a); /* wraps at the minimum, like PyTorch */   \
        const T q = (T)(a / b);                                                                         \
        return (T)(q - ((a % b != 0) && ((a < 0) != (b < 0))));                                         \
    }
RUMUS_EACH_INT(RX_INT, _)
static inline int rx_truthy_b(uint8_t x) { return x != 0; }

#endif

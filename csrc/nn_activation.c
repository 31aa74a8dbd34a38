/* Activation functions (erf, gelu, gelu_tanh, silu, leaky_relu, softplus, elu) and their fused
   backward ops grad * f'(x), on the strided iterator of runtime.c.

   Every op x dtype is one element function act_<op>_<sfx>(x, p0, p1) (backward: actb_<op>_<sfx>(g, x, p0, p1));
   p0/p1 carry the op's attributes (negative_slope, beta/threshold, alpha).  float32 uses branch-free
   approximations that gcc vectorises (erf: a rational fit, |error| < 5e-7; exp/tanh from fastmath.h),
   float64 uses libm. */
#include "internal/fastmath.h"
#include "internal/rumus.h"
#include "nn_activation.h"

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define SQRT_2_OVER_PI 0.79788456080286535588
#define KAPPA 0.044715

/* erf for float32: x * P(x^2) / Q(x^2) on [-4, 4] (outside, erf is +-1 in float32). */
static inline float erf_f32(float a) {
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

static inline float exp_f32(float x) { return rumus_expf(x); }
static inline double exp_f64(double x) { return exp(x); }
static inline float tanh_f32(float x) { return rumus_tanhf(x); }
static inline double tanh_f64(double x) { return tanh(x); }
static inline double erf_f64(double x) { return erf(x); }
static inline float log1p_f32(float x) { return log1pf(x); }
static inline double log1p_f64(double x) { return log1p(x); }
static inline float expm1_f32(float x) { return expm1f(x); }
static inline double expm1_f64(double x) { return expm1(x); }
/* Phi(x), the standard normal CDF; float64 through erfc keeps the far left tail accurate. */
static inline float phi_f32(float x) { return 0.5f * (1.0f + erf_f32(x * (float)INV_SQRT2)); }
static inline double phi_f64(double x) { return 0.5 * erfc(-x * INV_SQRT2); }

#define ELEMENT_FNS(sfx, T, ...)                                                                  \
    static inline T act_erf_##sfx(T x, T p0, T p1) { (void)p0; (void)p1; return erf_##sfx(x); }     \
    static inline T act_gelu_##sfx(T x, T p0, T p1) { (void)p0; (void)p1; return x * phi_##sfx(x); } \
    static inline T actb_gelu_##sfx(T g, T x, T p0, T p1) {                                       \
        (void)p0; (void)p1;                                                                       \
        return g * (phi_##sfx(x) + x * (T)INV_SQRT_2PI * exp_##sfx((T)-0.5 * x * x));              \
    }                                                                                             \
    static inline T act_gelu_tanh_##sfx(T x, T p0, T p1) {                                        \
        (void)p0; (void)p1;                                                                       \
        return (T)0.5 * x * ((T)1 + tanh_##sfx((T)SQRT_2_OVER_PI * (x + (T)KAPPA * x * x * x)));    \
    }                                                                                             \
    static inline T actb_gelu_tanh_##sfx(T g, T x, T p0, T p1) {                                  \
        (void)p0; (void)p1;                                                                       \
        const T x2 = x * x;                                                                       \
        const T t = tanh_##sfx((T)SQRT_2_OVER_PI * (x + (T)KAPPA * x2 * x));                       \
        return g * ((T)0.5 * ((T)1 + t) +                                                         \
                    (T)0.5 * x * ((T)1 - t * t) * (T)SQRT_2_OVER_PI * ((T)1 + (T)(3 * KAPPA) * x2)); \
    }                                                                                             \
    static inline T act_silu_##sfx(T x, T p0, T p1) {                                             \
        (void)p0; (void)p1;                                                                       \
        return x / ((T)1 + exp_##sfx(-x));                                                        \
    }                                                                                             \
    static inline T actb_silu_##sfx(T g, T x, T p0, T p1) {                                       \
        (void)p0; (void)p1;                                                                       \
        const T s = (T)1 / ((T)1 + exp_##sfx(-x));                                                \
        return g * s * ((T)1 + x * ((T)1 - s));                                                   \
    }                                                                                             \
    static inline T act_leaky_relu_##sfx(T x, T p0, T p1) { (void)p1; return x > 0 ? x : x * p0; } \
    static inline T actb_leaky_relu_##sfx(T g, T x, T p0, T p1) { (void)p1; return x > 0 ? g : g * p0; } \
    /* softplus: p0 = beta, p1 = threshold */                                                     \
    static inline T act_softplus_##sfx(T x, T p0, T p1) {                                         \
        const T bx = x * p0;                                                                      \
        return bx > p1 ? x : log1p_##sfx(exp_##sfx(bx)) / p0;                                            \
    }                                                                                             \
    static inline T actb_softplus_##sfx(T g, T x, T p0, T p1) {                                   \
        const T bx = x * p0;                                                                      \
        const T z = exp_##sfx(bx > p1 ? p1 : bx);                                                 \
        return bx > p1 ? g : g * z / (z + (T)1);                                                  \
    }                                                                                             \
    /* elu: p0 = alpha */                                                                         \
    static inline T act_elu_##sfx(T x, T p0, T p1) { (void)p1; return x > 0 ? x : p0 * expm1_##sfx(x); } \
    static inline T actb_elu_##sfx(T g, T x, T p0, T p1) {                                        \
        (void)p1;                                                                                 \
        return x > 0 ? g : g * p0 * exp_##sfx(x > 0 ? (T)0 : x);                                  \
    }

RUMUS_EACH_FLOAT(ELEMENT_FNS, _)

/* ---- loop templates ------------------------------------------------------------------------ */

#define DEF_ACT1(sfx, TT, op)                                                                    \
    RUMUS_CLONES static void loop_##op##_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {             \
        typedef TT T;                                                                            \
        const T p0 = (T)((const double *)ctx)[0], p1 = (T)((const double *)ctx)[1];             \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                          \
            T *o = (T *)p[0];                                                                    \
            const T *a = (const T *)p[1];                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = act_##op##_##sfx(a[i], p0, p1);               \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; i++)                                                      \
                *(T *)(p[0] + i * s[0]) = act_##op##_##sfx(*(const T *)(p[1] + i * s[1]), p0, p1); \
        }                                                                                        \
    }
#define ENT_ACT1(sfx, TT, op) {#op "_" #sfx, loop_##op##_##sfx, {sizeof(TT), sizeof(TT), 0, 0}},

#define DEF_ACT2(sfx, TT, op)                                                                    \
    RUMUS_CLONES static void loop_##op##_backward_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {    \
        typedef TT T;                                                                            \
        const T p0 = (T)((const double *)ctx)[0], p1 = (T)((const double *)ctx)[1];             \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T)) { \
            T *o = (T *)p[0];                                                                    \
            const T *g = (const T *)p[1], *x = (const T *)p[2];                                  \
            for (int64_t i = 0; i < n; i++) o[i] = actb_##op##_##sfx(g[i], x[i], p0, p1);        \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; i++)                                                      \
                *(T *)(p[0] + i * s[0]) = actb_##op##_##sfx(*(const T *)(p[1] + i * s[1]),        \
                                                           *(const T *)(p[2] + i * s[2]), p0, p1); \
        }                                                                                        \
    }
#define ENT_ACT2(sfx, TT, op) {#op "_backward_" #sfx, loop_##op##_backward_##sfx, {sizeof(TT), sizeof(TT), sizeof(TT), 0}},

#define FORWARD_OPS(X) X(erf) X(gelu) X(gelu_tanh) X(silu) X(leaky_relu) X(softplus) X(elu)
#define BACKWARD_OPS(X) X(gelu) X(gelu_tanh) X(silu) X(leaky_relu) X(softplus) X(elu)

#define X_DEF1(op) RUMUS_EACH_FLOAT(DEF_ACT1, op)
#define X_ENT1(op) RUMUS_EACH_FLOAT(ENT_ACT1, op)
#define X_DEF2(op) RUMUS_EACH_FLOAT(DEF_ACT2, op)
#define X_ENT2(op) RUMUS_EACH_FLOAT(ENT_ACT2, op)

FORWARD_OPS(X_DEF1)
BACKWARD_OPS(X_DEF2)

static const rumus_loop_entry TABLE[] = {FORWARD_OPS(X_ENT1) BACKWARD_OPS(X_ENT2)};
#define TABLE_SIZE ((int64_t)(sizeof(TABLE) / sizeof(TABLE[0])))

/* ---- entry points --------------------------------------------------------------------------- */

int64_t rumus_act_find(const char *name) { return rumus_table_find(TABLE, TABLE_SIZE, name); }

#define OFF(ptr, off, k) ((ptr) + (off) * (int64_t)e->isz[k])

void rumus_act_run1(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                    double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[2] = {OFF(o, oo, 0), OFF(a, ao, 1)};
    const double params[2] = {p0, p1};
    rumus_iterate(2, meta, base, e->isz, e->fn, params);
}

void rumus_act_run2(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                    int64_t bo, double p0, double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[3] = {OFF(o, oo, 0), OFF(a, ao, 1), OFF(b, bo, 2)};
    const double params[2] = {p0, p1};
    rumus_iterate(3, meta, base, e->isz, e->fn, params);
}

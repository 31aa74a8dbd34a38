/* The elementwise kernels that are not expressions of the table (rumus_contracts/ops/expressions.py,
   rendered into C at build time): where (a bool condition selecting between two values) and clamp
   (Python-number bounds, saturating integer semantics).  rumus_iterate walks the strided N-d space and
   calls a loop once per innermost run. */
#include "internal/half.h"
#include "internal/rumus.h"
#include "elementwise.h"

/* ---- where and clamp ----------------------------------------------------------------------- */

#define DEF_WHERE(sfx, TT, ...)                                                                         \
    static void where_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                   \
        typedef TT T;                                                                                   \
        RUMUS_UNUSED(ctx);                                                                              \
        if (s[0] == (int64_t)sizeof(T) && s[1] == 1 && s[2] == (int64_t)sizeof(T) &&                    \
            s[3] == (int64_t)sizeof(T)) {                                                               \
            T *o = (T *)p[0];                                                                           \
            const uint8_t *c = (const uint8_t *)p[1];                                                   \
            const T *A = (const T *)p[2], *B = (const T *)p[3];                                         \
            for (int64_t i = 0; i < n; i++) {                                                           \
                const T a = A[i], b = B[i]; /* both loaded: the select compiles to a blend, not a branch */ \
                o[i] = c[i] ? a : b;                                                                    \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        /* one branch a broadcast scalar (relu's backward: where(y > 0, g, 0)): a vectorizable blend */ \
        if (s[0] == (int64_t)sizeof(T) && s[1] == 1 && (s[2] == 0 || s[3] == 0) &&                      \
            (s[2] == (int64_t)sizeof(T) || s[3] == (int64_t)sizeof(T))) {                               \
            T *o = (T *)p[0];                                                                           \
            const uint8_t *c = (const uint8_t *)p[1];                                                   \
            if (s[3] == 0) {                                                                            \
                const T *A = (const T *)p[2];                                                           \
                const T bv = *(const T *)p[3];                                                          \
                for (int64_t i = 0; i < n; i++) {                                                       \
                    const T a = A[i];                                                                   \
                    o[i] = c[i] ? a : bv;                                                               \
                }                                                                                       \
            } else {                                                                                    \
                const T *B = (const T *)p[3];                                                           \
                const T av = *(const T *)p[2];                                                          \
                for (int64_t i = 0; i < n; i++) {                                                       \
                    const T b = B[i];                                                                   \
                    o[i] = c[i] ? av : b;                                                               \
                }                                                                                       \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                               \
            const uint8_t c = *(const uint8_t *)(p[1] + i * s[1]);                                      \
            const T a = *(const T *)(p[2] + i * s[2]), b = *(const T *)(p[3] + i * s[3]);               \
            *(T *)(p[0] + i * s[0]) = c ? a : b;                                                        \
        }                                                                                               \
    }
#define ENT_WHERE(sfx, TT, ...) {"where_" #sfx, where_##sfx, {sizeof(TT), 1, sizeof(TT), sizeof(TT)}},

/* clamp: ctx = {lo, hi} as doubles (+-inf when absent). Floats keep NaN (comparisons are false).
   T is stored, C compared in (float16/bfloat16: float, the clamped value rounded back once). */
#define DEF_CLAMP_F(sfx, T, C, LD, ST)                                                                  \
    static void clamp_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                   \
        const C lo = (C)((const double *)ctx)[0], hi = (C)((const double *)ctx)[1];                     \
        for (int64_t i = 0; i < n; i++) {                                                               \
            C x = LD(*(const T *)(p[1] + i * s[1]));                                                    \
            x = x < lo ? lo : x;                                                                        \
            *(T *)(p[0] + i * s[0]) = ST(x > hi ? hi : x);                                              \
        }                                                                                               \
    }
#define EACH_CLAMP_F(M)                                                                                 \
    M(f32, float, float, RUMUS_AS_IS, RUMUS_AS_IS) M(f64, double, double, RUMUS_AS_IS, RUMUS_AS_IS)     \
    M(f16, uint16_t, float, rumus_h2f, rumus_f2h) M(bf16, uint16_t, float, rumus_bf2f, rumus_f2bf)
/* Integers: compare in double, store the bound truncated toward zero and saturated to the type
   (what casting the float result of PyTorch's promoted clamp back to the integer type gives). */
#define DEF_CLAMP_I(sfx, TT, ...)                                                                       \
    static void clamp_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                   \
        typedef TT T;                                                                                   \
        const double lo = ((const double *)ctx)[0], hi = ((const double *)ctx)[1];                      \
        const T tmin = (T)(((T)-1 < (T)0) ? ((T)1 << (sizeof(T) * 8 - 2)) * -2 : 0);                    \
        const T tmax = (T)~tmin;                                                                        \
        const T lo_t = (T)saturate(lo, (double)tmin, (double)tmax, (int64_t)tmin, (int64_t)tmax);       \
        const T hi_t = (T)saturate(hi, (double)tmin, (double)tmax, (int64_t)tmin, (int64_t)tmax);       \
        for (int64_t i = 0; i < n; i++) {                                                               \
            T x = *(const T *)(p[1] + i * s[1]);                                                        \
            if ((double)x < lo) x = lo_t;                                                               \
            if ((double)x > hi) x = hi_t;                                                               \
            *(T *)(p[0] + i * s[0]) = x;                                                                \
        }                                                                                               \
    }
#define ENT_CLAMP(sfx, TT, ...) {"clamp_" #sfx, clamp_##sfx, {sizeof(TT), sizeof(TT), 0, 0}},

static int64_t saturate(double v, double dmin, double dmax, int64_t imin, int64_t imax) {
    if (v != v) return 0;
    if (v <= dmin) return imin;
    if (v >= dmax) return imax;
    return (int64_t)v;
}

RUMUS_EACH_ALL(DEF_WHERE, _)
EACH_CLAMP_F(DEF_CLAMP_F)
RUMUS_EACH_INT(DEF_CLAMP_I, _)

static const rumus_loop_entry TABLE[] = {RUMUS_EACH_ALL(ENT_WHERE, _) RUMUS_EACH_NUMERIC(ENT_CLAMP, _)
                                         ENT_CLAMP(f16, uint16_t) ENT_CLAMP(bf16, uint16_t)};
#define TABLE_SIZE ((int64_t)(sizeof(TABLE) / sizeof(TABLE[0])))

/* ---- entry points --------------------------------------------------------------------------- */

int64_t rumus_ew_find(const char *name) { return rumus_table_find(TABLE, TABLE_SIZE, name); }

#define OFF(ptr, off, k) ((ptr) + (off) * (int64_t)e->isz[k])

void rumus_ew_run1p(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                    double p1) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[2] = {OFF(o, oo, 0), OFF(a, ao, 1)};
    const double params[2] = {p0, p1};
    rumus_iterate(2, meta, base, e->isz, e->fn, params);
}

void rumus_ew_run3(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                   int64_t bo, char *c, int64_t co) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[4] = {OFF(o, oo, 0), OFF(a, ao, 1), OFF(b, bo, 2), OFF(c, co, 3)};
    rumus_iterate(4, meta, base, e->isz, e->fn, NULL);
}

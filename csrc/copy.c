/* Data movement: strided copy with dtype conversion (every pair of dtypes), and fill.

   Conversions (docs/ARCHITECTURE.md, "Casts"; the wgpu backend does the same):
   - float -> int truncates toward zero and SATURATES: NaN -> 0, +inf and values above the target's
     range -> its maximum, -inf and values below -> its minimum (C leaves these undefined; x86 gives
     INT_MIN, other machines other values, so they are pinned here);
   - int -> narrower int wraps (two's complement, as C and PyTorch do);
   - anything -> bool is x != 0 (NaN -> true); bool -> number is 0/1;
   - float16/bfloat16 load as float (exact) and convert on from there; anything -> float16/bfloat16
     rounds once to nearest even (internal/half.h). */
#include <stdint.h>
#include "internal/rumus.h"
#include "internal/half.h"
#include "copy.h"

/* double -> integer type TD, saturating, NaN -> 0. LO and HI are the type's bounds, exact as doubles;
   a double >= HI truncates to >= HI, so comparing before the (then well-defined) C cast is exact. */
#define DEF_SAT(TD, LO, HI)                                                                             \
    static inline TD rumus_sat_##TD(double x) {                                                         \
        if (x != x) return 0;                                                                           \
        if (x >= (HI)) return (TD)(HI);                                                                 \
        if (x <= (LO)) return (TD)(LO);                                                                 \
        return (TD)x;                                                                                   \
    }
/* int64's maximum 2^63 - 1 is not a double: compare with 2^63 and return INT64_MAX itself */
static inline int64_t rumus_sat_int64_t(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}
DEF_SAT(int32_t, -2147483648.0, 2147483647.0)
DEF_SAT(int16_t, -32768.0, 32767.0)
DEF_SAT(int8_t, -128.0, 127.0)
DEF_SAT(uint8_t, 0.0, 255.0)

#define CV_F(TD, x) ((TD)(x))
#define CV_I(TD, x) _Generic((x), float: rumus_sat_##TD((double)(x)), double: rumus_sat_##TD((double)(x)), \
                             default: (TD)(x))
#define CV_B(TD, x) ((TD)((x) != 0))
#define CV_H(TD, x) RUMUS_TO_H(x)
#define CV_BF(TD, x) RUMUS_TO_BF(x)

/* Source loaders: the 16-bit floats widen to float first (exactly). */
#define LD_N(x) (x)
#define LD_H(x) rumus_h2f(x)
#define LD_BF(x) rumus_bf2f(x)

/* Source list: M(suffix, C type, loader, ...). */
#define EACH_SRC(M, ...)                                                                                \
    M(f32, float, LD_N, __VA_ARGS__) M(f64, double, LD_N, __VA_ARGS__)                                  \
    M(i64, int64_t, LD_N, __VA_ARGS__) M(i32, int32_t, LD_N, __VA_ARGS__)                               \
    M(i16, int16_t, LD_N, __VA_ARGS__) M(i8, int8_t, LD_N, __VA_ARGS__)                                 \
    M(u8, uint8_t, LD_N, __VA_ARGS__) M(b, uint8_t, LD_N, __VA_ARGS__)                                  \
    M(f16, uint16_t, LD_H, __VA_ARGS__) M(bf16, uint16_t, LD_BF, __VA_ARGS__)

/* Destination list: M(suffix, C type, converter, ...). */
#define EACH_DST(M, ...)                                                                                \
    M(f32, float, CV_F, __VA_ARGS__) M(f64, double, CV_F, __VA_ARGS__)                                  \
    M(f16, uint16_t, CV_H, __VA_ARGS__) M(bf16, uint16_t, CV_BF, __VA_ARGS__)                           \
    M(i64, int64_t, CV_I, __VA_ARGS__) M(i32, int32_t, CV_I, __VA_ARGS__)                               \
    M(i16, int16_t, CV_I, __VA_ARGS__) M(i8, int8_t, CV_I, __VA_ARGS__)                                 \
    M(u8, uint8_t, CV_I, __VA_ARGS__) M(b, uint8_t, CV_B, __VA_ARGS__)

#define DEF_COPY(dsfx, TD, CV, ssfx, TS, LD)                                                            \
    static void copy_##ssfx##_##dsfx(int64_t n, char **p, const int64_t *s, const void *ctx) {          \
        RUMUS_UNUSED(ctx);                                                                              \
        if (s[0] == (int64_t)sizeof(TD) && s[1] == (int64_t)sizeof(TS)) {                               \
            TD *o = (TD *)p[0];                                                                         \
            const TS *a = (const TS *)p[1];                                                             \
            for (int64_t i = 0; i < n; i++) o[i] = CV(TD, LD(a[i]));                                        \
        } else if (s[1] == 0) {                                                                         \
            const TD v = CV(TD, LD(*(const TS *)p[1]));                                                     \
            for (int64_t i = 0; i < n; i++) *(TD *)(p[0] + i * s[0]) = v;                               \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++)                                                             \
                *(TD *)(p[0] + i * s[0]) = CV(TD, LD(*(const TS *)(p[1] + i * s[1])));                      \
        }                                                                                               \
    }
#define ENT_COPY(dsfx, TD, CV, ssfx, TS, LD)                                                                   \
    {"copy_" #ssfx "_" #dsfx, copy_##ssfx##_##dsfx, {sizeof(TD), sizeof(TS), 0, 0}},

#define DEF_COPY_FROM(ssfx, TS, LD, _) EACH_DST(DEF_COPY, ssfx, TS, LD)
#define ENT_COPY_FROM(ssfx, TS, LD, _) EACH_DST(ENT_COPY, ssfx, TS, LD)

typedef struct {
    double f;
    int64_t i;
} fill_value;

/* The fill value: floats (16-bit ones rounded once) from the double, integers and bool from the int64. */
#define FILL_FROM_CV_F(fv) ((fv)->f)
#define FILL_FROM_CV_H(fv) ((fv)->f)
#define FILL_FROM_CV_BF(fv) ((fv)->f)
#define FILL_FROM_CV_I(fv) ((fv)->i)
#define FILL_FROM_CV_B(fv) ((fv)->i)

#define DEF_FILL(sfx, TT, CV, ...)                                                                      \
    static void fill_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                    \
        typedef TT T;                                                                                   \
        const fill_value *fv = (const fill_value *)ctx;                                                 \
        const T v = CV(TT, FILL_FROM_##CV(fv));                                                         \
        if (s[0] == (int64_t)sizeof(T)) {                                                               \
            T *o = (T *)p[0];                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                                   \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;                                \
        }                                                                                               \
    }
#define ENT_FILL(sfx, TT, CV, ...) {"fill_" #sfx, fill_##sfx, {sizeof(TT), 0, 0, 0}},

EACH_SRC(DEF_COPY_FROM, _)
EACH_DST(DEF_FILL, _)

static const rumus_loop_entry TABLE[] = {EACH_SRC(ENT_COPY_FROM, _) EACH_DST(ENT_FILL, _)};
#define TABLE_SIZE ((int64_t)(sizeof(TABLE) / sizeof(TABLE[0])))

int64_t rumus_copy_find(const char *name) { return rumus_table_find(TABLE, TABLE_SIZE, name); }

void rumus_copy_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[2] = {o + oo * e->isz[0], a + ao * e->isz[1]};
    rumus_iterate(2, meta, base, e->isz, e->fn, NULL);
}

void rumus_fill_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, double value, int64_t ivalue) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[1] = {o + oo * e->isz[0]};
    const fill_value fv = {value, ivalue};
    rumus_iterate(1, meta, base, e->isz, e->fn, &fv);
}

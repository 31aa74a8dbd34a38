/* Data movement: strided copy with dtype conversion (every pair of dtypes), and fill.

   Conversions follow C: float -> int truncates toward zero (through int64, so narrow and unsigned
   targets wrap instead of hitting undefined behaviour), anything -> bool is x != 0, bool -> number
   is 0/1. */
#include "internal/rumus.h"
#include "copy.h"

#define CV_F(TD, x) ((TD)(x))
#define CV_I(TD, x) _Generic((x), float: (TD)(int64_t)(x), double: (TD)(int64_t)(x), default: (TD)(x))
#define CV_B(TD, x) ((TD)((x) != 0))

/* Destination list: M(suffix, C type, converter, ...). */
#define EACH_DST(M, ...)                                                                                \
    M(f32, float, CV_F, __VA_ARGS__) M(f64, double, CV_F, __VA_ARGS__)                                  \
    M(i64, int64_t, CV_I, __VA_ARGS__) M(i32, int32_t, CV_I, __VA_ARGS__)                               \
    M(i16, int16_t, CV_I, __VA_ARGS__) M(i8, int8_t, CV_I, __VA_ARGS__)                                 \
    M(u8, uint8_t, CV_I, __VA_ARGS__) M(b, uint8_t, CV_B, __VA_ARGS__)

#define DEF_COPY(dsfx, TD, CV, ssfx, TS)                                                                \
    static void copy_##ssfx##_##dsfx(int64_t n, char **p, const int64_t *s, const void *ctx) {          \
        RUMUS_UNUSED(ctx);                                                                              \
        if (s[0] == (int64_t)sizeof(TD) && s[1] == (int64_t)sizeof(TS)) {                               \
            TD *o = (TD *)p[0];                                                                         \
            const TS *a = (const TS *)p[1];                                                             \
            for (int64_t i = 0; i < n; i++) o[i] = CV(TD, a[i]);                                        \
        } else if (s[1] == 0) {                                                                         \
            const TD v = CV(TD, *(const TS *)p[1]);                                                     \
            for (int64_t i = 0; i < n; i++) *(TD *)(p[0] + i * s[0]) = v;                               \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++)                                                             \
                *(TD *)(p[0] + i * s[0]) = CV(TD, *(const TS *)(p[1] + i * s[1]));                      \
        }                                                                                               \
    }
#define ENT_COPY(dsfx, TD, CV, ssfx, TS)                                                                   \
    {"copy_" #ssfx "_" #dsfx, copy_##ssfx##_##dsfx, {sizeof(TD), sizeof(TS), 0, 0}},

#define DEF_COPY_FROM(ssfx, TS, _) EACH_DST(DEF_COPY, ssfx, TS)
#define ENT_COPY_FROM(ssfx, TS, _) EACH_DST(ENT_COPY, ssfx, TS)

typedef struct {
    double f;
    int64_t i;
} fill_value;

#define DEF_FILL(sfx, TT, CV, ...)                                                                      \
    static void fill_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                    \
        typedef TT T;                                                                                   \
        const fill_value *fv = (const fill_value *)ctx;                                                 \
        const T v = _Generic((T)0, float: (T)fv->f, double: (T)fv->f, default: CV(T, fv->i));           \
        if (s[0] == (int64_t)sizeof(T)) {                                                               \
            T *o = (T *)p[0];                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                                   \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;                                \
        }                                                                                               \
    }
#define ENT_FILL(sfx, TT, CV, ...) {"fill_" #sfx, fill_##sfx, {sizeof(TT), 0, 0, 0}},

RUMUS_EACH_ALL(DEF_COPY_FROM, _)
EACH_DST(DEF_FILL, _)

static const rumus_loop_entry TABLE[] = {RUMUS_EACH_ALL(ENT_COPY_FROM, _) EACH_DST(ENT_FILL, _)};
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

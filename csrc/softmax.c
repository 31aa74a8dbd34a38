/* softmax / log_softmax along one dim, max-shifted. Contiguous float32 rows use the vectorised
   float exp of internal/fastmath.h with double sums; everything else (float16/bfloat16 rows too, each
   result rounded once) is computed in double.

   meta (elements): [nk, kept shape[nk], kept out strides[nk], kept in strides[nk], n, out stride, in stride]. */
#include "internal/fastmath.h"
#include "internal/half.h"
#include "internal/row_max.h"
#include "internal/rumus.h"
#include "softmax.h"

#define LANES 16

/* A contiguous float32 row: vectorised max, exp (internal/fastmath.h) and sums (16 double lanes).
   Fusing the exp and sum passes measured slower (gcc vectorises the fused loop worse). */
RUMUS_CLONES_WIDE static void softmax_row_f32(const float *x, float *o, int64_t n, int log_out) {
    if (n < LANES) { /* short rows: no lanes to set up */
        float m = x[0];
        for (int64_t i = 1; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            o[i] = rumus_expf(x[i] - m);
            sum += (double)o[i];
        }
        if (log_out) {
            const float lse = (float)log(sum);
            for (int64_t i = 0; i < n; i++) o[i] = (x[i] - m) - lse;
        } else {
            const float inv = (float)(1.0 / sum);
            for (int64_t i = 0; i < n; i++) o[i] *= inv;
        }
        return;
    }
    double ls[LANES];
    for (int j = 0; j < LANES; j++) ls[j] = 0.0;
    const float m = rumus_row_max_f32(x, n);
    int64_t i;
    for (i = 0; i < n; i++) o[i] = rumus_expf(x[i] - m);
    for (i = 0; i + LANES <= n; i += LANES) {
        _Pragma("GCC unroll 1") for (int j = 0; j < LANES; j++) ls[j] += (double)o[i + j];
    }
    for (int j = 0; i < n; i++, j++) ls[j] += (double)o[i];
    double sum = 0.0;
    for (int j = 0; j < LANES; j++) sum += ls[j];
    if (log_out) {
        const float lse = (float)log(sum);
        for (i = 0; i < n; i++) o[i] = (x[i] - m) - lse;
    } else {
        const float inv = (float)(1.0 / sum);
        for (i = 0; i < n; i++) o[i] *= inv;
    }
}

typedef struct {
    rumus_rlayout L;
    int64_t n, so, si;
} smax_layout;

typedef void (*smax_fn)(const smax_layout *S, char *o, const char *x, int64_t s, int64_t e);
typedef struct {
    const char *name;
    smax_fn fn;
    int sz;
} smax_entry;

/* One row loop for both ops (log_out picks the result); LD widens a stored value to double, ST rounds a
   double back into the stored type (float16/bfloat16 once, through internal/half.h). */
#define DEF_SOFTMAX(sfx, T, LD, ST)                                                                     \
    static void smax_rows_##sfx(const smax_layout *S, char *o, const char *x, int64_t s, int64_t e,     \
                                int log_out) {                                                          \
        const int64_t n = S->n, so = S->so, si = S->si;                                                 \
        rumus_kept_iter it;                                                                             \
        rumus_kept_start(&S->L, S->L.nk, s, &it);                                                       \
        for (int64_t r = s; r < e; r++, rumus_kept_next(&S->L, S->L.nk, &it)) {                         \
            const int64_t oo = it.oo, xo = it.xo;                                                       \
            if (sizeof(T) == 4 && si == 4 && so == 4) {                                                 \
                softmax_row_f32((const float *)(x + xo), (float *)(o + oo), n, log_out);                \
                continue;                                                                               \
            }                                                                                           \
            const char *q = x + xo;                                                                     \
            char *w = o + oo;                                                                           \
            double m = -INFINITY, sum = 0.0;                                                            \
            for (int64_t i = 0; i < n; i++) {                                                           \
                const double v = (double)LD(*(const T *)(q + i * si));                                  \
                if (v > m || v != v) m = v;                                                             \
            }                                                                                           \
            for (int64_t i = 0; i < n; i++) sum += exp((double)LD(*(const T *)(q + i * si)) - m);       \
            const double inv = 1.0 / sum, lse = log_out ? log(sum) : 0.0;                               \
            for (int64_t i = 0; i < n; i++) {                                                           \
                const double v = (double)LD(*(const T *)(q + i * si)) - m;                              \
                *(T *)(w + i * so) = (T)ST(log_out ? v - lse : exp(v) * inv);                           \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    static void softmax_##sfx(const smax_layout *S, char *o, const char *x, int64_t s, int64_t e) {     \
        smax_rows_##sfx(S, o, x, s, e, 0);                                                              \
    }                                                                                                   \
    static void log_softmax_##sfx(const smax_layout *S, char *o, const char *x, int64_t s, int64_t e) { \
        smax_rows_##sfx(S, o, x, s, e, 1);                                                              \
    }
#define ENT_SOFTMAX(sfx, T, ...)                                                                        \
    {"softmax_" #sfx, softmax_##sfx, sizeof(T)}, {"log_softmax_" #sfx, log_softmax_##sfx, sizeof(T)},

#define EACH_SOFTMAX(M)                                                                                 \
    M(f32, float, RUMUS_AS_IS, RUMUS_AS_IS) M(f64, double, RUMUS_AS_IS, RUMUS_AS_IS)                    \
    M(f16, uint16_t, rumus_h2f, rumus_f64_to_h) M(bf16, uint16_t, rumus_bf2f, rumus_f64_to_bf)

EACH_SOFTMAX(DEF_SOFTMAX)

static const smax_entry TABLE[] = {EACH_SOFTMAX(ENT_SOFTMAX)};

int64_t rumus_softmax_find(const char *name) { return RUMUS_FIND_IN(TABLE, name); }

/* one softmax call's rows on the pool (csrc/pool.c) */
typedef struct {
    const smax_layout *S;
    char *o;
    const char *x;
    smax_fn fn;
} smax_job;

static void smax_range(void *p, int64_t s, int64_t e) {
    const smax_job *j = (const smax_job *)p;
    j->fn(j->S, j->o, j->x, s, e);
}

void rumus_softmax_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo) {
    const smax_entry *e = &TABLE[loop];
    smax_layout S;
    /* the kept dims as in a reduction layout (no reduced dims); the softmax dim follows them */
    const int nk = (int)meta[0];
    const int64_t *d = meta + 1 + 3 * nk;
    S.L.nk = nk;
    S.L.nr = 0;
    S.L.inner = 1;
    S.L.outer = 1;
    for (int k = 0; k < nk; k++) {
        S.L.ksh[k] = meta[1 + k];
        S.L.kout[k] = meta[1 + nk + k] * e->sz;
        S.L.kin[k] = meta[1 + 2 * nk + k] * e->sz;
        S.L.outer *= S.L.ksh[k];
    }
    S.n = d[0];
    S.so = d[1] * e->sz;
    S.si = d[2] * e->sz;
    const int64_t rows = S.L.outer;
    if (rows == 0 || S.n == 0) return;
    char *ob = o + oo * e->sz;
    const char *xb = x + xo * e->sz;
    const int nt = rumus_threads_for_units_grain(rows, rows * S.n, RUMUS_GRAIN_ROWS); /* an exp per element */
    smax_job job = {&S, ob, xb, e->fn};
    rumus_parallel_for(nt, rows, smax_range, &job); /* each row computed whole by one thread */
}

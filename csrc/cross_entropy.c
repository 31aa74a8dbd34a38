/* Fused cross-entropy over class-index targets (rumus_contracts.ops.cross_entropy) on contiguous [m, c]
   logits. Targets arrive as int64, already checked against the class count by the wrapper; w is NULL
   for "no class weights". Forward per row: a max pass, a sum-of-exp pass (lse), and with label
   smoothing a pass for sum_c w_c (lse - x_c). Backward per row: one pass writing
     dx_c = g ((1 - s) w_t (p_c - [c == t]) + (s / c) (W p_c - w_c)),   p_c = exp(x_c - lse).
   float64 rows compute in double. float32 rows use the vectorised float exp of internal/fastmath.h with
   double sums over LANES lanes (the forward's loss in double), as the rendered softmax rows do
   (row_c.py). Each row is computed by one thread, so results do not depend on the thread count. */
#include <math.h>
#include "internal/fastmath.h"
#include "internal/row_max.h"
#include "internal/rumus.h"
#include "cross_entropy.h"

#define LANES 16

/* a float32 row's logsumexp: a max pass, then exp(x - max) summed in double lanes */
RUMUS_CLONES_WIDE static double lse_row_f32(const float *x, int64_t c) {
    double ls[LANES];
    for (int j = 0; j < LANES; j++) ls[j] = 0.0;
    const float m = rumus_row_max_f32(x, c);
    int64_t i;
    const float shift = isinf(m) ? 0.0f : m; /* all -inf: lse = -inf, as torch */
    for (i = 0; i + LANES <= c; i += LANES) {
        _Pragma("GCC unroll 1") for (int j = 0; j < LANES; j++) ls[j] += (double)rumus_expf(x[i + j] - shift);
    }
    for (int j = 0; i < c; i++, j++) ls[j] += (double)rumus_expf(x[i] - shift);
    double sum = 0.0;
    for (int j = 0; j < LANES; j++) sum += ls[j];
    return log(sum) + (double)shift;
}

/* d(logits) of one float32 row: g (a p - b w_c), the target's entry corrected after */
RUMUS_CLONES_WIDE static void bwd_row_f32(const float *x, const float *w, float *d, int64_t c, float lse, float a, float b) {
    if (w) {
        for (int64_t i = 0; i < c; i++) d[i] = a * rumus_expf(x[i] - lse) - b * w[i];
    } else {
        for (int64_t i = 0; i < c; i++) d[i] = a * rumus_expf(x[i] - lse) - b;
    }
}

#define DEF_CROSS_ENTROPY(sfx, T)                                                                        \
    static void fwd_rows_##sfx(const T *x, const int64_t *t, const T *w, T *loss, T *lse, int64_t c,   \
                               int64_t ignore, double ls, int64_t s, int64_t e) {                      \
        for (int64_t r = s; r < e; r++) {                                                               \
            const T *row = x + r * c;                                                                   \
            const double l = LSE_##sfx(row, c);                                                         \
            lse[r] = (T)l;                                                                              \
            if (t[r] == ignore) {                                                                       \
                loss[r] = (T)0;                                                                         \
                continue;                                                                               \
            }                                                                                           \
            const double wt = w ? (double)w[t[r]] : 1.0;                                                \
            double out = (1.0 - ls) * wt * (l - (double)row[t[r]]);                                     \
            if (ls != 0.0) {                                                                            \
                double smooth = 0.0;                                                                    \
                for (int64_t j = 0; j < c; j++) smooth += (w ? (double)w[j] : 1.0) * (l - (double)row[j]); \
                out += ls / (double)c * smooth;                                                         \
            }                                                                                           \
            loss[r] = (T)out;                                                                           \
        }                                                                                               \
    }                                                                                                   \
    static void bwd_rows_##sfx(const T *g, const T *x, const int64_t *t, const T *w, const T *lse, T *dx, \
                               int64_t c, int64_t ignore, double ls, double wsum, int64_t s, int64_t e) { \
        for (int64_t r = s; r < e; r++) {                                                               \
            const T *row = x + r * c;                                                                   \
            T *drow = dx + r * c;                                                                       \
            if (t[r] == ignore) {                                                                       \
                for (int64_t j = 0; j < c; j++) drow[j] = (T)0;                                         \
                continue;                                                                               \
            }                                                                                           \
            const double gr = (double)g[r], l = (double)lse[r];                                         \
            const double wt = w ? (double)w[t[r]] : 1.0;                                                \
            const double a = (1.0 - ls) * wt + ls / (double)c * wsum, b = ls / (double)c;              \
            BWD_ROW_##sfx(row, w, drow, c, l, gr * a, gr * b);                                          \
            drow[t[r]] = (T)((double)drow[t[r]] - gr * (1.0 - ls) * wt);                                \
        }                                                                                               \
    }                                                                                                   \
    /* one call's rows on the pool (csrc/pool.c) */                                                     \
    typedef struct {                                                                                    \
        const T *x;                                                                                     \
        const int64_t *t;                                                                               \
        const T *w;                                                                                     \
        T *loss, *lse;                                                                                  \
        int64_t c, ignore;                                                                              \
        double ls;                                                                                      \
    } fwd_job_##sfx;                                                                                    \
    static void fwd_range_##sfx(void *p, int64_t s, int64_t e) {                                        \
        const fwd_job_##sfx *j = (const fwd_job_##sfx *)p;                                              \
        fwd_rows_##sfx(j->x, j->t, j->w, j->loss, j->lse, j->c, j->ignore, j->ls, s, e);                \
    }                                                                                                   \
    typedef struct {                                                                                    \
        const T *g, *x;                                                                                 \
        const int64_t *t;                                                                               \
        const T *w, *lse;                                                                               \
        T *dx;                                                                                          \
        int64_t c, ignore;                                                                              \
        double ls, wsum;                                                                                \
    } bwd_job_##sfx;                                                                                    \
    static void bwd_range_##sfx(void *p, int64_t s, int64_t e) {                                        \
        const bwd_job_##sfx *j = (const bwd_job_##sfx *)p;                                              \
        bwd_rows_##sfx(j->g, j->x, j->t, j->w, j->lse, j->dx, j->c, j->ignore, j->ls, j->wsum, s, e);   \
    }                                                                                                   \
    void rumus_cross_entropy_fwd_##sfx(const T *x, const int64_t *t, const T *w, T *loss, T *lse,        \
                                       int64_t m, int64_t c, int64_t ignore_index, double ls) {         \
        if (m == 0) return;                                                                             \
        const int nt = rumus_threads_for_units_grain(m, m * c, RUMUS_GRAIN_ROWS);                       \
        fwd_job_##sfx job = {x, t, w, loss, lse, c, ignore_index, ls};                                  \
        rumus_parallel_for(nt, m, fwd_range_##sfx, &job);                                               \
    }                                                                                                   \
    void rumus_cross_entropy_bwd_##sfx(const T *g, const T *x, const int64_t *t, const T *w, const T *lse, \
                                       T *dx, int64_t m, int64_t c, int64_t ignore_index, double ls) {  \
        if (m == 0) return;                                                                             \
        double wsum = (double)c;                                                                        \
        if (w) {                                                                                        \
            wsum = 0.0;                                                                                 \
            for (int64_t j = 0; j < c; j++) wsum += (double)w[j];                                       \
        }                                                                                               \
        const int nt = rumus_threads_for_units_grain(m, m * c, RUMUS_GRAIN_ROWS);                       \
        bwd_job_##sfx job = {g, x, t, w, lse, dx, c, ignore_index, ls, wsum};                           \
        rumus_parallel_for(nt, m, bwd_range_##sfx, &job);                                               \
    }

/* float64 rows in double */
static double lse_row_f64(const double *x, int64_t c) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < c; j++) m = fmax(m, x[j]);
    const double shift = isinf(m) ? 0.0 : m; /* all -inf: lse = -inf, as torch */
    for (int64_t j = 0; j < c; j++) sum += exp(x[j] - shift);
    return log(sum) + shift;
}

static void bwd_row_f64(const double *x, const double *w, double *d, int64_t c, double lse, double a, double b) {
    for (int64_t j = 0; j < c; j++) d[j] = a * exp(x[j] - lse) - b * (w ? w[j] : 1.0);
}

#define LSE_f32(row, c) lse_row_f32(row, c)
#define LSE_f64(row, c) lse_row_f64(row, c)
#define BWD_ROW_f32(row, w, d, c, l, a, b) bwd_row_f32(row, w, d, c, (float)(l), (float)(a), (float)(b))
#define BWD_ROW_f64(row, w, d, c, l, a, b) bwd_row_f64(row, w, d, c, l, a, b)

DEF_CROSS_ENTROPY(f32, float)
DEF_CROSS_ENTROPY(f64, double)

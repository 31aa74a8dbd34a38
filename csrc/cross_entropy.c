/* Fused cross-entropy over class-index targets (rumus_contracts.ops.cross_entropy) on contiguous [m, c]
   logits. Targets arrive as int64, already checked against the class count by the wrapper; w is NULL
   for "no class weights". Forward per row: a max pass, a sum-of-exp pass (lse), and with label
   smoothing a pass for sum_c w_c (lse - x_c). Backward per row: one pass writing
     dx_c = g ((1 - s) w_t (p_c - [c == t]) + (s / c) (W p_c - w_c)),   p_c = exp(x_c - lse).
   Math in double; each row is computed by one thread, so results do not depend on the thread count. */
#include <math.h>
#include "internal/rumus.h"
#include "cross_entropy.h"

#define DEF_CROSS_ENTROPY(sfx, T)                                                                        \
    static void fwd_rows_##sfx(const T *x, const int64_t *t, const T *w, T *loss, T *lse, int64_t c,   \
                               int64_t ignore, double ls, int64_t s, int64_t e) {                      \
        for (int64_t r = s; r < e; r++) {                                                               \
            const T *row = x + r * c;                                                                   \
            double m = -INFINITY, sum = 0.0;                                                            \
            for (int64_t j = 0; j < c; j++) m = fmax(m, (double)row[j]);                               \
            const double shift = isinf(m) ? 0.0 : m; /* all -inf: lse = -inf, as torch */               \
            for (int64_t j = 0; j < c; j++) sum += exp((double)row[j] - shift);                         \
            const double l = log(sum) + shift;                                                          \
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
            for (int64_t j = 0; j < c; j++) {                                                           \
                const double wj = w ? (double)w[j] : 1.0;                                               \
                drow[j] = (T)(gr * (a * exp((double)row[j] - l) - b * wj));                             \
            }                                                                                           \
            drow[t[r]] = (T)((double)drow[t[r]] - gr * (1.0 - ls) * wt);                                \
        }                                                                                               \
    }                                                                                                   \
    void rumus_cross_entropy_fwd_##sfx(const T *x, const int64_t *t, const T *w, T *loss, T *lse,        \
                                       int64_t m, int64_t c, int64_t ignore_index, double ls) {         \
        if (m == 0) return;                                                                             \
        const int nt = rumus_threads_for_units(m, m * c);                                               \
        if (nt <= 1) {                                                                                  \
            fwd_rows_##sfx(x, t, w, loss, lse, c, ignore_index, ls, 0, m);                              \
            return;                                                                                     \
        }                                                                                               \
        RUMUS_PARALLEL_FOR                                                                              \
        for (int k = 0; k < nt; k++)                                                                    \
            fwd_rows_##sfx(x, t, w, loss, lse, c, ignore_index, ls, m * k / nt, m * (k + 1) / nt);      \
    }                                                                                                   \
    void rumus_cross_entropy_bwd_##sfx(const T *g, const T *x, const int64_t *t, const T *w, const T *lse, \
                                       T *dx, int64_t m, int64_t c, int64_t ignore_index, double ls) {  \
        if (m == 0) return;                                                                             \
        double wsum = (double)c;                                                                        \
        if (w) {                                                                                        \
            wsum = 0.0;                                                                                 \
            for (int64_t j = 0; j < c; j++) wsum += (double)w[j];                                       \
        }                                                                                               \
        const int nt = rumus_threads_for_units(m, m * c);                                               \
        if (nt <= 1) {                                                                                  \
            bwd_rows_##sfx(g, x, t, w, lse, dx, c, ignore_index, ls, wsum, 0, m);                       \
            return;                                                                                     \
        }                                                                                               \
        RUMUS_PARALLEL_FOR                                                                              \
        for (int k = 0; k < nt; k++)                                                                    \
            bwd_rows_##sfx(g, x, t, w, lse, dx, c, ignore_index, ls, wsum, m * k / nt, m * (k + 1) / nt); \
    }

DEF_CROSS_ENTROPY(f32, float)
DEF_CROSS_ENTROPY(f64, double)

/* Fused backward of softmax and log_softmax along one dim of contiguous [outer, n, inner] tensors: one
   pass sums each row (g*y for softmax, g for log_softmax, in double), a second writes
     softmax:      dx = y * (g - sum(g*y))
     log_softmax:  dx = g - exp(y) * sum(g)
   Each row is computed by one thread, so results do not depend on the thread count. */
#include "internal/rumus.h"
#include "softmax_backward.h"

#define DEF_SOFTMAX_BACKWARD(sfx, T)                                                                    \
    static void rows_##sfx(const T *g, const T *y, T *dx, int64_t n, int64_t inner, int log_form,      \
                           int64_t s, int64_t e) {                                                      \
        for (int64_t r = s; r < e; r++) {                                                               \
            const int64_t base = (r / inner) * n * inner + r % inner;                                   \
            double sum = 0.0;                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                           \
                const int64_t at = base + i * inner;                                                    \
                sum += log_form ? (double)g[at] : (double)g[at] * (double)y[at];                        \
            }                                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                           \
                const int64_t at = base + i * inner;                                                    \
                dx[at] = log_form ? (T)((double)g[at] - exp((double)y[at]) * sum)                       \
                                  : (T)((double)y[at] * ((double)g[at] - sum));                         \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    /* one call's rows on the pool (csrc/pool.c) */                                                     \
    typedef struct {                                                                                    \
        const T *g, *y;                                                                                 \
        T *dx;                                                                                          \
        int64_t n, inner;                                                                               \
        int log_form;                                                                                   \
    } sb_job_##sfx;                                                                                     \
    static void sb_range_##sfx(void *p, int64_t s, int64_t e) {                                         \
        const sb_job_##sfx *j = (const sb_job_##sfx *)p;                                                \
        rows_##sfx(j->g, j->y, j->dx, j->n, j->inner, j->log_form, s, e);                               \
    }                                                                                                   \
    void rumus_softmax_backward_##sfx(const T *g, const T *y, T *dx, int64_t outer, int64_t n,          \
                                      int64_t inner, int log_form) {                                    \
        const int64_t rows = outer * inner;                                                             \
        if (rows == 0 || n == 0) return;                                                                \
        const int nt = rumus_threads_for_units(rows, rows * n);                                         \
        sb_job_##sfx job = {g, y, dx, n, inner, log_form};                                              \
        rumus_parallel_for(nt, rows, sb_range_##sfx, &job);                                             \
    }

DEF_SOFTMAX_BACKWARD(f32, float)
DEF_SOFTMAX_BACKWARD(f64, double)

/* The max of a float32 row, NaN winning as in torch, over RUMUS_ROW_LANES independent lanes so that gcc
   vectorises it (inlined into the caller's target clones). Shared by the rendered row kernels (row_loops.h) and cross_entropy.c. */
#ifndef RUMUS_ROW_MAX_H
#define RUMUS_ROW_MAX_H

#include <math.h>
#include <stdint.h>

#define RUMUS_ROW_LANES 16

static inline float rumus_row_max_f32(const float *x, int64_t n) {
    float lm[RUMUS_ROW_LANES];
    for (int j = 0; j < RUMUS_ROW_LANES; j++) lm[j] = -INFINITY;
    int64_t i = 0;
    for (; i + RUMUS_ROW_LANES <= n; i += RUMUS_ROW_LANES) {
        _Pragma("GCC unroll 1") for (int j = 0; j < RUMUS_ROW_LANES; j++) {
            const float v = x[i + j];
            lm[j] = (v > lm[j] || v != v) ? v : lm[j];
        }
    }
    for (int j = 0; i < n; i++, j++) lm[j] = (x[i] > lm[j] || x[i] != x[i]) ? x[i] : lm[j];
    float m = lm[0];
    for (int j = 1; j < RUMUS_ROW_LANES; j++) m = (lm[j] > m || lm[j] != lm[j]) ? lm[j] : m;
    return m;
}

#endif

/* Fixed-point i16 kernels (SPEC E): integer arithmetic only, no float anywhere, so every machine and
   every thread count gives the same bits.

   fixed_linear: acc = sum_k int64(x[m,k]) * int64(w[k,n]) (+ int64(b[n]) << s), then requantize.
   Each int16 x int16 product fits in int32 (|p| <= 2^30), so products are formed in int32 and
   widened once before the int64 accumulation; the sum cannot overflow int64 below k = 2^32.

   Work is split into tiles of TILE_M rows x TILE_N columns whose int64 accumulators stay in L1;
   one weight row segment is loaded once per k and feeds TILE_M rows. Tiles are independent, so
   threads (the kernels' pool, csrc/pool.c) split them with no reduction across threads: the result
   never depends on the thread count. */
#include <stdint.h>
#include <string.h>

#include "fixed_i16.h"
#include "internal/rumus.h" /* rumus_parallel_for */
#include "runtime.h" /* the backend's thread budget (rumus_get_num_threads), not OpenMP's process-wide one */

#define TILE_M 4
#define TILE_N 256
/* The hot loop is compiled twice on x86-64 (AVX2 and baseline) and picked at load time: integer
   results are identical either way, only the speed differs. */
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define HOT_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef HOT_CLONES
#define HOT_CLONES
#endif

/* Below this many multiply-adds a layer runs on the calling thread: thread start-up costs more. */
#define PARALLEL_MACS ((int64_t)1 << 18)

/* Round half away from zero by 2^s and saturate. Works on the magnitude as uint64, so that no
   int64 accumulator (INT64_MIN and INT64_MAX included) can overflow on the way:
   (a + 2^(s-1)) >> s == (a >> s) + bit (s-1) of a, for a >= 0. */
static inline int16_t requantize_one(int64_t acc, int s) {
    int64_t r;
    if (s == 0) {
        r = acc;
    } else {
        const int neg = acc < 0;
        const uint64_t mag = neg ? (uint64_t)0 - (uint64_t)acc : (uint64_t)acc;
        const uint64_t q = (mag >> s) + ((mag >> (s - 1)) & 1u);
        if (q > 32768u) return neg ? INT16_MIN : INT16_MAX;
        r = neg ? -(int64_t)q : (int64_t)q;
    }
    return r > INT16_MAX ? INT16_MAX : r < INT16_MIN ? INT16_MIN : (int16_t)r;
}

void rumus_fixed_requantize(int16_t *out, const int64_t *acc, int64_t count, int scale_log2) {
    for (int64_t i = 0; i < count; i++) out[i] = requantize_one(acc[i], scale_log2);
}

void rumus_fixed_relu(int16_t *out, const int16_t *x, int64_t count) {
    for (int64_t i = 0; i < count; i++) out[i] = x[i] > 0 ? x[i] : 0;
}

typedef struct {
    const int16_t *x, *w, *b;
    int64_t x_sm, x_sk, w_sk, w_sn, b_s, k;
    int s;
} linear_args;

/* acc[r][j] += x[r] * w[j] for one k; the contiguous-weight loop is the hot one (vectorised). */
static inline void mac_rows(int64_t acc[TILE_M][TILE_N], const int32_t *xv, int rows, const int16_t *wk,
                            int64_t w_sn, int64_t nb) {
    if (w_sn == 1 && rows == TILE_M) {
        const int32_t x0 = xv[0], x1 = xv[1], x2 = xv[2], x3 = xv[3];
        for (int64_t j = 0; j < nb; j++) {
            const int32_t wj = wk[j];
            acc[0][j] += (int64_t)(x0 * wj);
            acc[1][j] += (int64_t)(x1 * wj);
            acc[2][j] += (int64_t)(x2 * wj);
            acc[3][j] += (int64_t)(x3 * wj);
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        const int32_t xr = xv[r];
        if (xr == 0) continue;
        if (w_sn == 1) {
            for (int64_t j = 0; j < nb; j++) acc[r][j] += (int64_t)(xr * (int32_t)wk[j]);
        } else {
            for (int64_t j = 0; j < nb; j++) acc[r][j] += (int64_t)(xr * (int32_t)wk[j * w_sn]);
        }
    }
}

HOT_CLONES static void linear_tile(const linear_args *a, int16_t *out, int64_t out_sm, int64_t out_sn, int64_t m0,
                        int rows, int64_t n0, int64_t nb) {
    int64_t acc[TILE_M][TILE_N];
    for (int r = 0; r < rows; r++)
        for (int64_t j = 0; j < nb; j++)
            /* b << s written as a product: a left shift of a negative value is undefined in C */
            acc[r][j] = a->b ? (int64_t)a->b[(n0 + j) * a->b_s] * ((int64_t)1 << a->s) : 0;
    int32_t xv[TILE_M];
    for (int64_t kk = 0; kk < a->k; kk++) {
        for (int r = 0; r < rows; r++) xv[r] = a->x[(m0 + r) * a->x_sm + kk * a->x_sk];
        mac_rows(acc, xv, rows, a->w + kk * a->w_sk + n0 * a->w_sn, a->w_sn, nb);
    }
    for (int r = 0; r < rows; r++) {
        int16_t *o = out + (m0 + r) * out_sm + n0 * out_sn;
        for (int64_t j = 0; j < nb; j++) o[j * out_sn] = requantize_one(acc[r][j], a->s);
    }
}

typedef struct {
    const linear_args *a;
    int16_t *out;
    int64_t out_sm, out_sn, m, n, tiles_n;
} linear_job;

/* tiles [begin, end), row-major over (tiles_m, tiles_n) */
static void linear_tiles_range(void *p, int64_t begin, int64_t end) {
    const linear_job *j = (const linear_job *)p;
    const linear_args *a = j->a;
    int16_t *out = j->out;
    const int64_t out_sm = j->out_sm, out_sn = j->out_sn, m = j->m, n = j->n, tiles_n = j->tiles_n;
    for (int64_t t = begin; t < end; t++) {
        const int64_t m0 = (t / tiles_n) * TILE_M, n0 = (t % tiles_n) * TILE_N;
        const int rows = (int)(m - m0 < TILE_M ? m - m0 : TILE_M);
        const int64_t nb = n - n0 < TILE_N ? n - n0 : TILE_N;
        linear_tile(a, out, out_sm, out_sn, m0, rows, n0, nb);
    }
}

void rumus_fixed_linear(int16_t *out, int64_t out_sm, int64_t out_sn, const int16_t *x, int64_t x_sm,
                        int64_t x_sk, const int16_t *w, int64_t w_sk, int64_t w_sn, const int16_t *bias,
                        int64_t b_s, int64_t m, int64_t k, int64_t n, int scale_log2) {
    const linear_args a = {x, w, bias, x_sm, x_sk, w_sk, w_sn, b_s, k, scale_log2};
    const int64_t tiles_m = (m + TILE_M - 1) / TILE_M, tiles_n = (n + TILE_N - 1) / TILE_N;
    const int64_t tiles = tiles_m * tiles_n;
    if (tiles == 0) return;
    int threads = 1;
    if (m * k * n >= PARALLEL_MACS) threads = rumus_get_num_threads();
    if (threads > tiles) threads = (int)tiles;
    linear_job j = {&a, out, out_sm, out_sn, m, n, tiles_n};
    rumus_parallel_for(threads, tiles, linear_tiles_range, &j);
}

/* float16 / bfloat16 GEMM through float32 BLAS, one tile at a time.

   C[b] = A[b] @ B[b] for every batch entry b; operands are 16-bit words read through any element strides
   (offsets[3b..3b+2] are the entry's element offsets into A, B and C). Each C tile of TILE_M x TILE_N
   is the float32 product of panels converted on the fly: A's TILE_M x TILE_K rows and B's TILE_K x
   TILE_N columns, summed over the K blocks in order, then rounded once into C. So no float32 copy of a
   whole operand is ever made (the scratch is at most ~22 MiB however large the operands), and since
   the tiles depend on the shape alone and each float32 product goes through csrc/gemm_blocked.c
   (bit-identical at every thread count), so is the result. Without an attached BLAS the tile product
   is a plain float32 loop, in the same fixed order. */
#include <stdlib.h>

#include "internal/half.h"
#include "internal/rumus.h"
#include "gemm_blocked.h"
#include "gemm_half.h"

#define TILE_M 256
#define TILE_N 1024
#define TILE_K 4096

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One copy between float rows (row-major, `cols` long) and 16-bit words at [r * sr + c * sc], on the pool:
   a load fills to_f from from_h, a store fills to_h from from_f. */
typedef struct {
    float *to_f;
    const uint16_t *from_h;
    uint16_t *to_h;
    const float *from_f;
    int64_t cols, sr, sc;
    int bf16;
} panel_job;

/* rows [r0, r1) of a load, widened */
static void load_rows(void *p, int64_t r0, int64_t r1) {
    const panel_job *j = (const panel_job *)p;
    float *dst = j->to_f;
    const uint16_t *src = j->from_h;
    const int64_t cols = j->cols, sr = j->sr, sc = j->sc;
    const int bf16 = j->bf16;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *s = src + r * sr;
        float *d = dst + r * cols;
        if (bf16)
            for (int64_t c = 0; c < cols; c++) d[c] = rumus_bf2f(s[c * sc]);
        else
            for (int64_t c = 0; c < cols; c++) d[c] = rumus_h2f(s[c * sc]);
    }
}

/* rows [r0, r1) of a store, rounded once */
static void store_rows(void *p, int64_t r0, int64_t r1) {
    const panel_job *j = (const panel_job *)p;
    uint16_t *dst = j->to_h;
    const float *src = j->from_f;
    const int64_t cols = j->cols, sr = j->sr, sc = j->sc;
    const int bf16 = j->bf16;
    for (int64_t r = r0; r < r1; r++) {
        uint16_t *d = dst + r * sr;
        const float *s = src + r * cols;
        if (bf16)
            for (int64_t c = 0; c < cols; c++) d[c * sc] = rumus_f2bf(s[c]);
        else
            for (int64_t c = 0; c < cols; c++) d[c * sc] = rumus_f2h(s[c]);
    }
}

/* dst (rows x cols, row-major float) <- src[r * sr + c * sc] widened */
static void load_panel(float *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                       int bf16) {
    panel_job j = {dst, src, NULL, NULL, cols, sr, sc, bf16};
    rumus_parallel_for(rumus_threads_for_units(rows, rows * cols), rows, load_rows, &j);
}

/* dst[r * sr + c * sc] <- src (rows x cols, row-major float) rounded once */
static void store_tile(uint16_t *dst, const float *src, int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                       int bf16) {
    panel_job j = {NULL, NULL, dst, src, cols, sr, sc, bf16};
    rumus_parallel_for(rumus_threads_for_units(rows, rows * cols), rows, store_rows, &j);
}

typedef struct {
    const float *a, *b;
    float *c;
    int64_t nn, kk;
} product_job;

/* rows [i0, i1) of c = a @ b, each row's sums in order over p */
static void product_rows(void *ctx, int64_t i0, int64_t i1) {
    const product_job *t = (const product_job *)ctx;
    const float *a = t->a, *b = t->b;
    float *c = t->c;
    const int64_t nn = t->nn, kk = t->kk;
    for (int64_t i = i0; i < i1; i++) {
        float *ci = c + i * nn;
        for (int64_t j = 0; j < nn; j++) ci[j] = 0.0f;
        for (int64_t p = 0; p < kk; p++) {
            const float av = a[i * kk + p];
            const float *bp = b + p * nn;
            for (int64_t j = 0; j < nn; j++) ci[j] += av * bp[j];
        }
    }
}

/* c (mm x nn) = a (mm x kk) @ b (kk x nn), all row-major float; the same sums at every thread count */
static void tile_product(const float *a, const float *b, float *c, int64_t mm, int64_t nn, int64_t kk) {
    if (rumus_gemm(0, 1, 1, mm, nn, kk, a, 0, 0, kk, 0, b, 0, 0, nn, 0, c, 0, 0, nn)) return;
    const int nt = rumus_threads_for_units_grain(mm, mm * nn * kk, RUMUS_GRAIN_LOOP_MACS);
    product_job t = {a, b, c, nn, kk};
    rumus_parallel_for(nt, mm, product_rows, &t);
}

int rumus_gemm_half(int bf16, int64_t batch, const int64_t *offsets, int64_t m, int64_t n, int64_t k,
                    const uint16_t *A, int64_t a_sr, int64_t a_sc, const uint16_t *B, int64_t b_sr, int64_t b_sc,
                    uint16_t *C, int64_t c_sr, int64_t c_sc) {
    const int64_t tm = min64(m, TILE_M), tn = min64(n, TILE_N), tk = min64(k, TILE_K);
    float *ap = malloc(sizeof(float) * (size_t)(tm * tk)), *bp = malloc(sizeof(float) * (size_t)(tk * tn));
    float *cp = malloc(sizeof(float) * (size_t)(tm * tn));
    float *part = k > TILE_K ? malloc(sizeof(float) * (size_t)(tm * tn)) : NULL; /* a later K block's sum */
    const int ok = ap && bp && cp && (k <= TILE_K || part);
    for (int64_t e = 0; ok && e < batch; e++) {
        const uint16_t *Ab = A + offsets[3 * e], *Bb = B + offsets[3 * e + 1];
        uint16_t *Cb = C + offsets[3 * e + 2];
        for (int64_t j0 = 0; j0 < n; j0 += TILE_N) {
            const int64_t nn = min64(n - j0, TILE_N);
            for (int64_t i0 = 0; i0 < m; i0 += TILE_M) {
                const int64_t mm = min64(m - i0, TILE_M);
                for (int64_t k0 = 0; k0 < k; k0 += TILE_K) {
                    const int64_t kk = min64(k - k0, TILE_K);
                    load_panel(ap, Ab + i0 * a_sr + k0 * a_sc, mm, kk, a_sr, a_sc, bf16);
                    if (i0 == 0 || k > TILE_K) /* one K block: B's panel serves every row tile */
                        load_panel(bp, Bb + k0 * b_sr + j0 * b_sc, kk, nn, b_sr, b_sc, bf16);
                    tile_product(ap, bp, k0 == 0 ? cp : part, mm, nn, kk);
                    if (k0 > 0)
                        for (int64_t t = 0; t < mm * nn; t++) cp[t] += part[t];
                }
                store_tile(Cb + i0 * c_sr + j0 * c_sc, cp, mm, nn, c_sr, c_sc, bf16);
            }
        }
    }
    free(ap);
    free(bp);
    free(cp);
    free(part);
    return ok;
}

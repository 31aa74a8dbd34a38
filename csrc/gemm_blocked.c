/* GEMM as independent blocks of C on the kernels' threads, each block one single-threaded call of
   numpy's OpenBLAS (cblas_?gemm, handed over by address from Python) or, for float32 where it wins, of
   RUMUS's own kernel (csrc/sgemm_kernel.c, chosen in rumus_gemm_one).

   Why not OpenBLAS's own threading (which runs on the same threads through rumus_blas_callback)? Its
   jobs wait on each other inside every call (one packs a panel of B, the others read it), so one
   thread that shares its core with another process holds all of them up: on a loaded 2-core machine a
   1024^2 GEMM took 79 ms on 1 thread and 153 ms on 2. Independent blocks taken as threads come free
   lose only the share of the core that was taken.

   The blocks depend on the shape alone, never on the thread count, so every thread count makes the
   same BLAS calls on the same data: results are bit-identical at every thread count by construction. */
#include "internal/rumus.h"
#include "gemm_blocked.h"
#include "runtime.h"
#include "sgemm_kernel.h"


enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, float, const float *, int32_t, const float *,
                           int32_t, float, float *, int32_t);
typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                           int64_t, float, float *, int64_t);
typedef void (*dgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, double, const double *, int32_t,
                           const double *, int32_t, double, double *, int32_t);
typedef void (*dgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                           const double *, int64_t, double, double *, int64_t);

static void *g_sgemm = NULL, *g_dgemm = NULL;
static int g_int64 = 0; /* the library's integers are 64-bit (scipy-openblas64: symbols end in 64_) */

int rumus_gemm_attach(uintptr_t sgemm, uintptr_t dgemm, int int64_ints) {
    g_sgemm = (void *)sgemm;
    g_dgemm = (void *)dgemm;
    g_int64 = int64_ints;
    return g_sgemm != NULL && g_dgemm != NULL;
}

int rumus_gemm_attached(void) { return g_sgemm != NULL && g_dgemm != NULL; }

/* Multiply-adds per block, at least (some 5-10 us on one core), and the smallest block side. Blocks are
   halved, the longer side first, until there are TARGET_BLOCKS of them. Measured on the 16-core host
   (benchmarks/gemm_blocks.py, the MLP step's products, OpenBLAS's SkylakeX kernels): with 64-row/column
   blocks of >= 2^21 multiply-adds a 128-row product made at most 8 blocks, so 128x784x256 took 148 us at 16
   threads against torch's 61; with blocks of >= 2^18 and sides down to 16 (and the grain below) it takes
   57 us, the step's products 2-3x less, the MLP step 1.41 ms against 1.82, and one thread is no slower
   (smaller blocks cost some packing, but OpenBLAS's large-call overheads go: 128x784x256 566 -> 430 us). */
#define BLOCK_MACS (RUMUS_GRAIN_MACS / 2) /* a thread gets a block's work at least */
#define MIN_SIDE 16
#define TARGET_BLOCKS 64

static int64_t half16(int64_t x) { return ((x + 1) / 2 + 15) / 16 * 16; }

void rumus_gemm_blocks(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t *bm, int64_t *bn) {
    int64_t a = m, b = n;
    while (batch * ((m + a - 1) / a) * ((n + b - 1) / b) < TARGET_BLOCKS) {
        int64_t na = a, nb = b;
        if (a >= b && a > MIN_SIDE)
            na = half16(a);
        else if (b > MIN_SIDE)
            nb = half16(b);
        else if (a > MIN_SIDE)
            na = half16(a);
        else
            break;
        if (na * nb * k < BLOCK_MACS) break;
        a = na;
        b = nb;
    }
    *bm = a;
    *bn = b;
}

typedef struct {
    int f64, ta, tb;
    int64_t m, n, k, bm, bn, mb, nb;
    const char *A, *B;
    char *C;
    int64_t inner;                               /* batch entries along the inner batch dim */
    int64_t a_bs[2], b_bs[2], c_bs[2], lda, ldb, ldc, esz; /* batch strides: outer, inner */
    const char *bias;                            /* NULL, or n values added to every row of C */
    int blas;                                    /* some block goes to OpenBLAS: the caller holds a region */
} gemm_job;

int rumus_gemm_fits(int64_t a, int64_t b, int64_t c) {
    return g_int64 || (a <= INT32_MAX && b <= INT32_MAX && c <= INT32_MAX);
}

/* One call; `held`: the caller holds a rumus_blas_serial region across all its calls (rumus_gemm_bias and the
   convolutions around their blocks), so an OpenBLAS call needs no region of its own (no lock per block). */
static int gemm_one(int held, int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                    const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc) {
    const int oa = ta ? TRANS : NO_TRANS, ob = tb ? TRANS : NO_TRANS;
    if (!f64 && rumus_sgemm_routes(m, n, k) &&
        rumus_sgemm(ta, tb, m, n, k, (const float *)A, lda, (const float *)B, ldb, accumulate, (float *)C, ldc))
        return 1; /* RUMUS's own kernel where it beats OpenBLAS (csrc/sgemm_kernel.c; the rule: the shape alone) */
    if (!held) rumus_blas_serial_begin(); /* OpenBLAS on one thread */
    if (f64) {
        const double beta = accumulate ? 1.0 : 0.0;
        if (g_int64)
            ((dgemm64_fn)g_dgemm)(ROW_MAJOR, oa, ob, m, n, k, 1.0, (const double *)A, lda, (const double *)B, ldb,
                                  beta, (double *)C, ldc);
        else
            ((dgemm32_fn)g_dgemm)(ROW_MAJOR, oa, ob, (int32_t)m, (int32_t)n, (int32_t)k, 1.0, (const double *)A,
                                  (int32_t)lda, (const double *)B, (int32_t)ldb, beta, (double *)C, (int32_t)ldc);
    } else {
        const float beta = accumulate ? 1.0f : 0.0f;
        if (g_int64)
            ((sgemm64_fn)g_sgemm)(ROW_MAJOR, oa, ob, m, n, k, 1.0f, (const float *)A, lda, (const float *)B, ldb, beta,
                                  (float *)C, ldc);
        else
            ((sgemm32_fn)g_sgemm)(ROW_MAJOR, oa, ob, (int32_t)m, (int32_t)n, (int32_t)k, 1.0f, (const float *)A,
                                  (int32_t)lda, (const float *)B, (int32_t)ldb, beta, (float *)C, (int32_t)ldc);
    }
    if (!held) rumus_blas_serial_end();
    return 1;
}

int rumus_gemm_one(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda, const void *B,
                   int64_t ldb, int accumulate, void *C, int64_t ldc) {
    return gemm_one(0, f64, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
}

int rumus_gemm_one_held(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                        const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc) {
    return gemm_one(1, f64, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
}

static void gemm_block(const gemm_job *g, int64_t u) {
    const int64_t per = g->mb * g->nb, bi = u / per, r = u % per, bo = bi / g->inner, bn = bi % g->inner;
    const int64_t i0 = (r / g->nb) * g->bm, j0 = (r % g->nb) * g->bn;
    const int64_t mm = g->m - i0 < g->bm ? g->m - i0 : g->bm, nn = g->n - j0 < g->bn ? g->n - j0 : g->bn;
    /* row i0 of op(A): A + i0*lda (no transpose) or A + i0 (transposed, A stored [k][m]); likewise B's column */
    const char *a = g->A + (bo * g->a_bs[0] + bn * g->a_bs[1] + (g->ta == NO_TRANS ? i0 * g->lda : i0)) * g->esz;
    const char *b = g->B + (bo * g->b_bs[0] + bn * g->b_bs[1] + (g->tb == NO_TRANS ? j0 : j0 * g->ldb)) * g->esz;
    char *c = g->C + (bo * g->c_bs[0] + bn * g->c_bs[1] + i0 * g->ldc + j0) * g->esz;
    gemm_one(g->blas, g->f64, g->ta == TRANS, g->tb == TRANS, mm, nn, g->k, a, g->lda, b, g->ldb, 0, c, g->ldc);
    if (g->bias == NULL) return;
    /* the bias while the block is still in this core's cache (Linear's epilogue: one pass less over C) */
    if (g->f64) {
        const double *bv = (const double *)g->bias + j0;
        for (int64_t i = 0; i < mm; i++)
            for (int64_t j = 0; j < nn; j++) ((double *)c)[i * g->ldc + j] += bv[j];
    } else {
        const float *bv = (const float *)g->bias + j0;
        for (int64_t i = 0; i < mm; i++)
            for (int64_t j = 0; j < nn; j++) ((float *)c)[i * g->ldc + j] += bv[j];
    }
}

static void gemm_blocks_range(void *p, int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; u++) gemm_block((const gemm_job *)p, u);
}

/* C[i][j] = op(A[i][j]) @ op(B[i][j]) (+ bias[n] on every row, when bias is not NULL) for i < outer, j < inner (two batch dims with strides *_bo, *_bi). ta/tb: 0 = as stored row-major (leading dim lda/ldb), 1 = transposed (A stored as [k][m], B
   as [n][k]). Strides in elements; C's rows are contiguous.
   The caller (Python) has OpenBLAS on one thread for the duration: each block is one plain call. */
int rumus_gemm_bias(int f64, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const void *A,
                    int64_t a_bo, int64_t a_bi, int64_t lda, int ta, const void *B, int64_t b_bo, int64_t b_bi,
                    int64_t ldb, int tb, void *C, int64_t c_bo, int64_t c_bi, int64_t ldc, const void *bias) {
    const int64_t batch = outer * inner;
    if (batch <= 0) return 1;
    if (!rumus_gemm_attached()) return 0;
    if (!g_int64 && (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX ||
                     ldc > INT32_MAX))
        return 0;
    gemm_job g = {f64, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, m, n, k, 0, 0, 0, 0,
                  (const char *)A, (const char *)B, (char *)C, inner, {a_bo, a_bi}, {b_bo, b_bi}, {c_bo, c_bi}, lda, ldb, ldc, f64 ? (int64_t)sizeof(double) : (int64_t)sizeof(float),
                  (const char *)bias};
    rumus_gemm_blocks(m, n, k, batch, &g.bm, &g.bn);
    g.mb = (m + g.bm - 1) / g.bm;
    g.nb = (n + g.bn - 1) / g.bn;
    const int64_t units = batch * g.mb * g.nb;
    /* each block is one plain call; OpenBLAS must not split it into jobs. Its thread count is process-wide, so
       it is left alone when no block goes to OpenBLAS: a numpy GEMM on another Python thread then keeps its
       split (and its bits) */
    const int64_t last_m = m - (g.mb - 1) * g.bm, last_n = n - (g.nb - 1) * g.bn;
    const int blas = f64 || !rumus_sgemm_routes(g.bm, g.bn, k) || !rumus_sgemm_routes(last_m, g.bn, k) ||
                     !rumus_sgemm_routes(g.bm, last_n, k) || !rumus_sgemm_routes(last_m, last_n, k);
    g.blas = blas;
    if (blas) rumus_blas_serial_begin();
    /* threads from the work (one per 2^18 multiply-adds at least), never more than there are blocks */
    const int nt = rumus_threads_for_units_grain(units, batch * m * n * k, RUMUS_GRAIN_MACS);
    rumus_parallel_for(nt, units, gemm_blocks_range, &g);
    if (blas) rumus_blas_serial_end(); /* numpy's other GEMMs split through the callback again */
    return 1;
}

int rumus_gemm(int f64, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const void *A, int64_t a_bo,
               int64_t a_bi, int64_t lda, int ta, const void *B, int64_t b_bo, int64_t b_bi, int64_t ldb, int tb,
               void *C, int64_t c_bo, int64_t c_bi, int64_t ldc) {
    return rumus_gemm_bias(f64, outer, inner, m, n, k, A, a_bo, a_bi, lda, ta, B, b_bo, b_bi, ldb, tb, C, c_bo, c_bi,
                           ldc, NULL);
}

/* 2-D convolution and pooling, for float and double.

   The convolution (rumus_conv2d_fused*): the work is cut into units (sample x group x band of output
   rows, from the shape alone), spread over the kernels' threads; each unit writes the im2col columns of
   its band into a per-thread buffer that stays in cache and makes one single-threaded BLAS call that
   reads and writes NCHW directly. No layout copies, no whole-batch column buffer.
   conv geometry (int64, elements): [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, layout, O, groups]

   rumus_im2col/col2im (whole batch, used by the numpy fallback where numpy's BLAS is not attached): cols
   rows r = (c*kh + i)*kw + j (a group's rows are contiguous), each Ho*Wo long, laid out per sample
   [N][rows][Ho*Wo] (layout 0) or channel-major [rows][N][Ho*Wo] (layout 1).
   pool geometry: [planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, divisor_override]

   Every pointer arrives already offset to the tensor's first element; tensors are contiguous. Work is
   split over independent units when it is large enough (rumus_threads_for, conv_threads). */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal/rumus.h"
#include "gemm_blocked.h"
#include "nn_conv.h"
#include "runtime.h"
#include "sgemm_kernel.h"

/* The stride-1 im2col/col2im's AVX-512F segments exist on x86-64 compilers that take per-function targets
   (as csrc/sgemm_avx512.c); elsewhere the portable loops run. */
#if (defined(__x86_64__) || defined(_M_X64)) && ((defined(__GNUC__) && __GNUC__ >= 8) || defined(__clang__))
#define RUMUS_CONV_SEG512 1
#include <immintrin.h>
#endif

/* ---- the fused convolution's plan: everything here depends on the shape alone, never on the thread
   count, so every thread count makes the same BLAS calls on the same data (bit-identical results) ---- */

#define COL_TILE ((int64_t)1 << 16)       /* elements of one band of im2col columns: stays in L2 */
#define WGRAD_PARTIALS ((int64_t)1 << 22) /* elements of weight-gradient partials, all slices together */
#define WGRAD_MAX_SLICES 64
#define WGRAD_OBLOCK 64                   /* output channels per weight-gradient unit, past 128 per group */
#define CONV_GRAIN ((int64_t)1 << 20)     /* multiply-adds per thread, at least (~20 us on one core) */
#define FEW_IMAGES 16                     /* below this many (sample, group) pairs, gradients also split... */
#define CBLOCK_ROWS 64                    /* ...by blocks of input channels of >= this many im2col rows */

typedef struct {
    int64_t N, C, H, W, Ho, Wo, O, G, Cg, Og, R, L;
    int64_t rows, tiles, TW;    /* a band: `rows` output rows, TW = rows*Wo columns; tiles bands per image */
    int64_t slots, ob, oblocks; /* weight gradient: batch slices, output channels per unit, units per group */
    int64_t cb, cblocks;        /* gradients: input channels per unit, units per group (each writes its own) */
} conv_plan;

/* Returns 0 where no BLAS call can be made (numpy's BLAS not attached, empty channels, 32-bit BLAS integers
   too small): the caller then takes the numpy path; nothing has been done. */
static int conv_plan_make(const int64_t *g, conv_plan *p) {
    if (!rumus_gemm_attached() || g[16] < 1 || g[1] < g[16] || g[15] < g[16] || g[4] < 1 || g[5] < 1) return 0;
    p->N = g[0], p->C = g[1], p->H = g[2], p->W = g[3], p->Ho = g[12], p->Wo = g[13], p->O = g[15], p->G = g[16];
    p->Cg = p->C / p->G, p->Og = p->O / p->G, p->R = p->Cg * g[4] * g[5], p->L = p->Ho * p->Wo;
    const int64_t row = p->R * p->Wo > 0 ? p->R * p->Wo : 1;
    p->rows = COL_TILE / row < 1 ? 1 : (COL_TILE / row > p->Ho ? p->Ho : COL_TILE / row);
    if (p->rows < 1) p->rows = 1;
    p->tiles = (p->Ho + p->rows - 1) / p->rows;
    p->TW = p->rows * p->Wo;
    const int64_t fit = WGRAD_PARTIALS / (p->O * p->R > 0 ? p->O * p->R : 1);
    p->slots = p->N < fit ? p->N : fit;
    p->slots = p->slots > WGRAD_MAX_SLICES ? WGRAD_MAX_SLICES : (p->slots < 1 ? 1 : p->slots);
    p->ob = p->Og <= 2 * WGRAD_OBLOCK ? (p->Og > 0 ? p->Og : 1) : WGRAD_OBLOCK;
    p->oblocks = (p->Og + p->ob - 1) / p->ob;
    /* few images (small batch): the gradients' units also split the input channels, so the work still
       spreads; blocks keep >= CBLOCK_ROWS im2col rows so that each BLAS call stays worth making */
    const int64_t pairs = p->N * p->G > 0 ? p->N * p->G : 1, kk = g[4] * g[5];
    int64_t want = pairs >= FEW_IMAGES ? 1 : (FEW_IMAGES + pairs - 1) / pairs;
    const int64_t most = p->Cg / ((CBLOCK_ROWS + kk - 1) / kk);
    want = want > most ? most : want;
    want = want < 1 ? 1 : want;
    p->cb = (p->Cg + want - 1) / want;
    p->cblocks = (p->Cg + p->cb - 1) / p->cb;
    return rumus_gemm_fits(p->R > p->L ? p->R : p->L, p->O, p->R > p->TW ? p->R : p->TW);
}

/* Threads for `units` independent units of `macs` multiply-adds in all: one per CONV_GRAIN, so a small
   convolution stays on the calling thread instead of paying a team's wake-up for a few microseconds. */
static int conv_threads(int64_t units, int64_t macs) {
    const int budget = rumus_get_num_threads();
    const int64_t most = macs / CONV_GRAIN;
    int64_t nt = most < budget ? most : budget;
    nt = nt > units ? units : nt;
    return nt < 1 ? 1 : (int)nt;
}

/* A per-thread buffer that only grows, kept between calls (the kernels' threads live as long as the process). */
typedef struct {
    void *p;
    size_t size;
} thread_buffer;

static void *thread_buffer_get(thread_buffer *b, size_t bytes) {
    if (bytes > b->size) {
        free(b->p);
        b->p = malloc(bytes);
        b->size = b->p ? bytes : 0;
    }
    return b->p;
}

static _Thread_local thread_buffer t_scratch; /* each thread's im2col band */
static _Thread_local thread_buffer t_plane;   /* its zero-padded plane for the stride-1 im2col / col2im */

static void *conv_scratch(size_t bytes) { return thread_buffer_get(&t_scratch, bytes); }
static void *conv_plane_scratch(size_t bytes) { return thread_buffer_get(&t_plane, bytes); }

#ifdef RUMUS_CONV_SEG512
/* The stride-1 im2col / col2im's segments (nn_conv_impl.h) with AVX-512F (seg512 below): one
   masked load and store per 16 floats (8 doubles), the segment's tail included. Adds are the same IEEE
   additions as the portable loop's, so the results do not depend on the path. */
#define SEG512 __attribute__((target("avx512f"), always_inline)) static inline

/* One type's pair: copy and add of n elements, LANES to a vector, the tail under a mask. */
#define DEFINE_SEG512(SUF, T, V, M, LANES, LOAD, MLOAD, STORE, MSTORE, ADD)                                     \
    SEG512 void seg_copy512_##SUF(T *d, const T *s, int64_t n) {                                               \
        int64_t k = 0;                                                                                          \
        for (; k + LANES <= n; k += LANES) STORE(d + k, LOAD(s + k));                                           \
        if (k < n) {                                                                                            \
            const M m = (M)((1u << (n - k)) - 1u);                                                              \
            MSTORE(d + k, m, MLOAD(m, s + k));                                                                  \
        }                                                                                                       \
    }                                                                                                           \
    SEG512 void seg_add512_##SUF(T *d, const T *s, int64_t n) {                                                \
        int64_t k = 0;                                                                                          \
        for (; k + LANES <= n; k += LANES) STORE(d + k, ADD(LOAD(d + k), LOAD(s + k)));                         \
        if (k < n) {                                                                                            \
            const M m = (M)((1u << (n - k)) - 1u);                                                              \
            const V sum = ADD(MLOAD(m, d + k), MLOAD(m, s + k));                                                \
            MSTORE(d + k, m, sum);                                                                              \
        }                                                                                                       \
    }

DEFINE_SEG512(f32, float, __m512, __mmask16, 16, _mm512_loadu_ps, _mm512_maskz_loadu_ps, _mm512_storeu_ps,
              _mm512_mask_storeu_ps, _mm512_add_ps)
DEFINE_SEG512(f64, double, __m512d, __mmask8, 8, _mm512_loadu_pd, _mm512_maskz_loadu_pd, _mm512_storeu_pd,
              _mm512_mask_storeu_pd, _mm512_add_pd)

/* Whether the segments use AVX-512F: where RUMUS's own GEMM has its AVX-512 part in force (tests lower it
   with rumus_sgemm_set_isa to reach the portable loops). */
static int seg512(void) { return rumus_sgemm_isa() == 2; }
#else
static int seg512(void) { return 0; }
#endif

/* The stride-1 im2col / col2im band of output rows [oh0, oh1) (nn_conv_impl.h): the geometry they share; the
   channel's input rows oh0 - ph ... lie in a plane of Hb rows of Wp columns. */
typedef struct {
    int64_t H, W, kh, kw, ph, pw, Wo, nb, Hb, Wp;
} s1_band;

static s1_band s1_band_of(const int64_t *g, int64_t oh0, int64_t oh1) {
    s1_band b = {g[2], g[3], g[4], g[5], g[8], g[9], g[13], oh1 - oh0, 0, 0};
    b.Hb = b.nb + b.kh - 1;
    b.Wp = b.Wo + b.kw - 1;
    return b;
}

/* Every BLAS call here is one plain single-threaded call (the parallelism is over units). float64, and
   float32 where RUMUS's own GEMM is not in force, hold OpenBLAS at one thread for the whole kernel (one
   counted region instead of one per call); float32 calls on the own kernel leave OpenBLAS's process-wide
   thread count alone, and the few that still go to OpenBLAS (rumus_gemm_one's rule) open their own region. */
static int conv_blas_serial(int f64) {
    const int hold = f64 || rumus_sgemm_isa() == 0 || rumus_sgemm_mode() == 1;
    if (hold) rumus_blas_serial_begin();
    return hold;
}

static void conv_blas_restore(int held) {
    if (held) rumus_blas_serial_end();
}

/* A fused kernel's first lines: its plan (or -1: the numpy path), its `units` and threads `nt`, and OpenBLAS
   held at one thread where needed (`prev`: whether conv_blas_restore must let it go). */
#define CONV_BEGIN(units_of_plan)                                                                  \
    conv_plan p;                                                                                   \
    if (!conv_plan_make(g, &p)) return -1;                                                         \
    const int64_t units = (units_of_plan);                                                         \
    const int nt = conv_threads(units, p.N * p.O * p.R * p.L);                                     \
    const int prev = conv_blas_serial(sizeof(T) == sizeof(double));

/* The output columns [lo, hi) whose input column ow*s + off lies inside [0, size). */
static inline void valid_range(int64_t size, int64_t off, int64_t s, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = size - 1 - off < 0 ? 0 : (size - 1 - off) / s + 1;
    if (a > n) a = n;
    if (b > n) b = n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

#define T float
#define FN(name) name##_f32
#include "internal/nn_conv_impl.h"
#undef T
#undef FN

#define T double
#define FN(name) name##_f64
#include "internal/nn_conv_impl.h"
#undef T
#undef FN

/* Direct 2-D convolution (no im2col buffer): forward, gradient of the input, gradient of the weight,
   for float and double, NCHW, contiguous tensors (pointers arrive offset to the first element).

   geometry (int64): [N, C, H, W, O, groups, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo]

   Each output row is accumulated in a small buffer that stays in L1 while every (channel, tap) pair
   adds one scaled, shifted input row to it: the innermost loop runs over the output width with unit
   stride when the convolution's stride is 1, so compilers vectorise it. Four output channels share
   each loaded input row (forward) and four input channels share each gradient row (input gradient),
   which makes the loop four FMAs per load instead of one.

   Work is split over independent units (an output plane, an input plane, a weight row) with a static
   schedule and each unit is summed by one thread in a fixed order: results are bit-identical at every
   thread count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "vision_conv.h"

/* AVX2+FMA and baseline clones of each kernel, picked by the loader (glibc ifunc) for the running CPU. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define RV_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define RV_CLONES
#endif

#define RV_PARALLEL_WORK ((int64_t)1 << 16)  /* multiply-adds below which a call stays on one thread */
#define RV_BLOCK 4                           /* output (forward) / input (backward) channels per pass */

int rv_openmp_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int rv_threads(int64_t units, int64_t work) {
    int nt = rv_openmp_threads();
    if (work < RV_PARALLEL_WORK) return 1;
    if (nt > units) nt = (int)(units < 1 ? 1 : units);
    return nt < 1 ? 1 : nt;
}

/* Output columns [lo, hi) whose input column ow*s + off lies inside [0, size). */
static inline void rv_valid(int64_t size, int64_t off, int64_t s, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = size - 1 - off < 0 ? 0 : (size - 1 - off) / s + 1;
    if (a > n) a = n;
    if (b > n) b = n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

#define GEOMETRY                                                                                        \
    const int64_t N = g[0], C = g[1], H = g[2], W = g[3], O = g[4], G = g[5], kh = g[6], kw = g[7];      \
    const int64_t sh = g[8], sw = g[9], ph = g[10], pw = g[11], dh = g[12], dw = g[13];                 \
    const int64_t Ho = g[14], Wo = g[15], cg = C / G, og = O / G;                                       \
    (void)N; (void)H; (void)W; (void)sh; (void)ph; (void)dh; (void)Ho; (void)cg; (void)og;

#define T float
#define FN(name) name##_f32
#include "vision_conv_impl.inc"
#undef T
#undef FN

#define T double
#define FN(name) name##_f64
#include "vision_conv_impl.inc"
#undef T
#undef FN

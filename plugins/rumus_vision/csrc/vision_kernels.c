/* rumus-vision's C kernels, instantiated once per element type (float, double): the direct convolution
   (vision_conv_impl.inc), row-wise max pooling (vision_pool_impl.inc) and
   average pooling (vision_avg_pool_impl.inc), with the helpers they share.
   Tensors are NCHW and contiguous; pointers arrive offset to the first element. Work is split over
   independent units with a static schedule and each unit is summed by one thread in a fixed order, so
   results are bit-identical at every thread count. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "vision_conv.h"
#include "vision_pool.h"
#include "vision_avg_pool.h"

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

/* Threads for `units` independent units of `work` multiply-adds (or compares). */
static int rv_threads(int64_t units, int64_t work) {
    int nt = rv_openmp_threads();
    if (work < RV_PARALLEL_WORK) return 1;
    if (nt > units) nt = (int)(units < 1 ? 1 : units);
    return nt < 1 ? 1 : nt;
}

/* Output columns [lo, hi) whose input column ow*s + off lies inside [0, size): the first ow with
   ow*s + off >= 0 and one past the last with ow*s + off <= size - 1, both clamped to [0, n]. */
static inline void rv_valid(int64_t size, int64_t off, int64_t s, int64_t n, int64_t *lo, int64_t *hi) {
    const int64_t first = off >= 0 ? 0 : (s - 1 - off) / s;
    const int64_t end = off > size - 1 ? 0 : (size - 1 - off) / s + 1;
    *lo = first < n ? first : n;
    *hi = end < *lo ? *lo : (end < n ? end : n);
}

/* conv geometry (int64): [N, C, H, W, O, groups, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo] */
#define CONV_GEOMETRY                                                                                       \
    const int64_t N = g[0], C = g[1], H = g[2], W = g[3], O = g[4], G = g[5], kh = g[6], kw = g[7];      \
    const int64_t sh = g[8], sw = g[9], ph = g[10], pw = g[11], dh = g[12], dw = g[13];                 \
    const int64_t Ho = g[14], Wo = g[15], cg = C / G, og = O / G;                                       \
    (void)N; (void)H; (void)W; (void)sh; (void)ph; (void)dh; (void)Ho; (void)cg; (void)og;

/* pool geometry (int64): [planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw] */
#define POOL_GEOMETRY                                                                                      \
    const int64_t P = g[0], H = g[1], W = g[2], Ho = g[3], Wo = g[4], kh = g[5], kw = g[6];             \
    const int64_t sh = g[7], sw = g[8], ph = g[9], pw = g[10], dh = g[11], dw = g[12];

/* vision_types.inc instantiates every kernel for one element type per pass: 1 float, 2 double */
#define RV_PASS 1
#include "vision_types.inc"
#undef RV_PASS
#define RV_PASS 2
#include "vision_types.inc"

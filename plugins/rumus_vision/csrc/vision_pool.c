/* 2-D max pooling (forward) by rows: each output row is the running maximum of kh*kw shifted (strided)
   input rows, so the innermost loop runs over the output width with selects only (vectorisable), instead
   of one window at a time. PyTorch's rule, in the window's row-major order: a later element wins if it
   is greater or NaN, and padding never wins. (The gradient stays with the core's kernel: a row-wise
   argmax with its scatter measured slower than the core's windows.)

   geometry (int64): [planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw]; planes (N*C) are independent
   and split over threads with a static schedule. */
#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "vision_pool.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define RV_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define RV_CLONES
#endif

static int rv_pool_threads(int64_t planes, int64_t work) {
#ifdef _OPENMP
    int nt = omp_get_max_threads();
#else
    int nt = 1;
#endif
    if (work < ((int64_t)1 << 16)) return 1;
    if (nt > planes) nt = (int)planes;
    return nt < 1 ? 1 : nt;
}

/* Output columns [lo, hi) whose input column ow*s + off lies inside [0, size). */
static inline void rv_pool_valid(int64_t size, int64_t off, int64_t s, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = size - 1 - off < 0 ? 0 : (size - 1 - off) / s + 1;
    if (a > n) a = n;
    if (b > n) b = n;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

#define GEOMETRY                                                                                       \
    const int64_t P = g[0], H = g[1], W = g[2], Ho = g[3], Wo = g[4], kh = g[5], kw = g[6];             \
    const int64_t sh = g[7], sw = g[8], ph = g[9], pw = g[10], dh = g[11], dw = g[12];

#define T float
#define FN(name) name##_f32
#include "vision_pool_impl.inc"
#undef T
#undef FN

#define T double
#define FN(name) name##_f64
#include "vision_pool_impl.inc"
#undef T
#undef FN

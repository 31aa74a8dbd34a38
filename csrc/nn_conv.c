/* Convolution helpers (im2col / col2im around numpy's GEMM) and 2-D pooling, for float and double.

   conv geometry (int64, elements): [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo, layout]
   cols rows r = (c*kh + i)*kw + j (a group's rows are contiguous), each Ho*Wo long, laid out
   per sample [N][rows][Ho*Wo] (layout 0) or channel-major [rows][N][Ho*Wo] (layout 1)
   pool geometry: [planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, divisor_override]

   Every pointer arrives already offset to the tensor's first element; tensors are contiguous. Work is
   split over independent rows / channels / planes when it is large enough (rumus_threads_for). */
#include <stdlib.h>

#include "internal/rumus.h"
#include "nn_conv.h"

#define NN_PARALLEL_WORK ((int64_t)1 << 21)

/* Threads for `units` independent units of `work` elements: memory-bound loops gain little from a second
   thread, and OpenMP teams started right after an OpenBLAS call wait on its spinning threads, so only
   large jobs are split. */
static int nn_threads(int64_t units, int64_t work) {
    if (work < NN_PARALLEL_WORK) return 1;
    int nt = rumus_threads_for(work);
    return nt > units ? (int)(units < 1 ? 1 : units) : nt;
}

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

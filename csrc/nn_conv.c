/* Convolution helpers (im2col / col2im around numpy's GEMM) and 2-D pooling, for float and double.

   conv geometry (int64, elements): [N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo]
   cols layout: [C*kh*kw rows][N][Ho*Wo], row r = (c*kh + i)*kw + j  (so a group's rows are contiguous)
   pool geometry: [planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, divisor_override]

   Every pointer arrives already offset to the tensor's first element; tensors are contiguous. Work is
   split over independent rows / channels / planes when it is large enough (rumus_threads_for). */
#include <stdlib.h>

#include "internal/rumus.h"
#include "nn_conv.h"

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

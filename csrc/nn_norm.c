/* Batch norm kernels, forward and backward (the layer, RMS and group norms, both ways, are rendered row ops:
   row_c.py), for float, double, float16 and bfloat16 (the 16-bit ones widened on load, every result rounded
   once on store).

   Statistics and sums are accumulated in double. Inputs are contiguous; pointers arrive already offset.
   Channels are split over threads when the work is large enough. */
#include <stdlib.h>

#include "internal/half.h"
#include "internal/rumus.h"
#include "nn_norm.h"

/* Threads for `units` independent units of `work` elements in all (never more threads than units). */
static int norm_threads(int64_t units, int64_t work) {
    if (work < ((int64_t)1 << 21)) return 1; /* memory-bound: a second thread pays only on large inputs */
    return rumus_threads_for_units(units, work);
}

#define STATS_FROM_X 0
#define LD(v) ((double)(v))
#define ST(d) ((T)(d))
#define T float
#define FN(name) name##_f32
#include "internal/nn_norm_impl.h"
#undef T
#undef FN

#define T double
#define FN(name) name##_f64
#include "internal/nn_norm_impl.h"
#undef T
#undef FN
#undef LD
#undef ST
#undef STATS_FROM_X

#define STATS_FROM_X 1
#define T uint16_t
#define LD(v) ((double)rumus_h2f(v))
#define ST(d) rumus_f64_to_h(d)
#define FN(name) name##_f16
#include "internal/nn_norm_impl.h"
#undef LD
#undef ST
#undef FN

#define LD(v) ((double)rumus_bf2f(v))
#define ST(d) rumus_f64_to_bf(d)
#define FN(name) name##_bf16
#include "internal/nn_norm_impl.h"
#undef LD
#undef ST
#undef FN
#undef T
#undef STATS_FROM_X

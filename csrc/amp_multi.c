/* The loss scaler's inf/NaN check over ALL gradients of a step in one call (PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_): each gradient is multiplied by 1/scale in place, and the
 * found-inf flag becomes 1.0 when any element of any of them is an inf or a NaN. Gradients are float32,
 * float16 or bfloat16 (kinds 0, 1, 2), each contiguous from its element offset; 16-bit ones are widened,
 * multiplied in float32 and rounded back (as PyTorch does), so a non-finite one stays what it was. */
#include <float.h>
#include <math.h>

#include "internal/rumus.h"
#include "internal/half.h"
#include "amp_multi.h"

/* |v| <= FLT_MAX is false exactly for inf and NaN; an int OR keeps the loops vectorizable */
static int unscale_f32(float *restrict g, int64_t n, float s) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const float v = g[i];
        bad |= !(fabsf(v) <= FLT_MAX);
        g[i] = v * s;
    }
    return bad;
}

/* float16 (bf == 0) or bfloat16 words: widened, multiplied in float32, rounded back; the compiler unswitches
   the loop on bf */
static int unscale_16(uint16_t *restrict g, int64_t n, float s, int bf) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const float v = bf ? rumus_bf2f(g[i]) : rumus_h2f(g[i]);
        bad |= !(fabsf(v) <= FLT_MAX);
        g[i] = bf ? rumus_f2bf(v * s) : rumus_f2h(v * s);
    }
    return bad;
}

void rumus_amp_unscale_check_multi(int64_t count, char **grads, const int64_t *offsets, const int64_t *numels,
                                   const int32_t *kinds, char *found_inf, int64_t fo, const char *inv_scale,
                                   int64_t io) {
    const float s = ((const float *)inv_scale)[io];
    int bad = 0;
    for (int64_t t = 0; t < count; t++) {
        if (kinds[t] == 0) bad |= unscale_f32((float *)grads[t] + offsets[t], numels[t], s);
        else bad |= unscale_16((uint16_t *)grads[t] + offsets[t], numels[t], s, kinds[t] == 2);
    }
    if (bad) ((float *)found_inf)[fo] = 1.0f;
}

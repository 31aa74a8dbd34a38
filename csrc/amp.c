/* The loss scaler's device ops (rumus.amp.GradScaler), float32, in place.
 * unscale_check: one pass over a gradient multiplies by 1/scale and notes any inf or NaN in the flag.
 * update_scale: PyTorch's _amp_update_scale_ on three one-element tensors. */
#include <float.h>
#include <math.h>

#include "internal/rumus.h"
#include "amp.h"

void rumus_amp_unscale_check_f32(char *g, int64_t go, int64_t n, char *found_inf, int64_t fo, const char *inv_scale,
                                 int64_t io) {
    float *restrict G = (float *)g + go;
    const float s = ((const float *)inv_scale)[io];
    int bad = 0;
    /* |v| <= FLT_MAX is false exactly for inf and NaN; an int OR keeps the loop vectorizable */
    for (int64_t i = 0; i < n; i++) {
        const float v = G[i];
        bad |= !(fabsf(v) <= FLT_MAX);
        G[i] = v * s;
    }
    if (bad) ((float *)found_inf)[fo] = 1.0f;
}

void rumus_amp_update_scale_f32(char *scale, int64_t so, char *tracker, int64_t to, const char *found_inf, int64_t fo,
                                double growth_factor, double backoff_factor, int64_t growth_interval) {
    float *S = (float *)scale + so, *T = (float *)tracker + to;
    if (((const float *)found_inf)[fo] != 0.0f) {
        *S = (float)((double)*S * backoff_factor);
        *T = 0.0f;
        return;
    }
    const float successful = *T + 1.0f;
    if (successful >= (float)growth_interval) {
        const float grown = (float)((double)*S * growth_factor);
        if (fabsf(grown) <= FLT_MAX) *S = grown; /* a scale that would overflow stays where it is */
        *T = 0.0f;
    } else {
        *T = successful;
    }
}

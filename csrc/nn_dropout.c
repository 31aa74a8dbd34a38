/* Counter-based dropout: keep(i) is a hash of (seed, offset + i), so every backend draws the same mask
   from the same seed and the backward pass recomputes it (see rumus_contracts/ops/nn.py). */
#include "internal/rumus.h"
#include "nn_dropout.h"

static inline uint32_t mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x21F0AAADu;
    h ^= h >> 15;
    h *= 0x735A2D97u;
    h ^= h >> 15;
    return h;
}

static uint32_t threshold_of(double p) {
    const double t = p * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

/* One thread's share [0, len) of the tensor, whose first element has counter value `base`; branch-free,
   so gcc vectorises the hash (and compiles an AVX2 clone). */
#define DEF_DROPOUT(sfx, T)                                                                      \
    RUMUS_CLONES static void dropout_range_##sfx(T *out, const T *in, int64_t len, uint32_t base, \
                                                 uint32_t key, uint32_t thr, T scale) {          \
        for (int64_t i = 0; i < len; i++) {                                                      \
            const uint32_t bits = mix32(mix32((base + (uint32_t)i) ^ key) + key);                \
            const T v = in[i] * scale;                                                           \
            out[i] = bits >= thr ? v : (T)0;                                                     \
        }                                                                                        \
    }                                                                                            \
    void rumus_dropout_##sfx(T *o, const T *x, int64_t n, double p, uint32_t seed, uint32_t offset) { \
        const uint32_t key = mix32(seed ^ 0x9E3779B9u), thr = threshold_of(p);                   \
        const T scale = (T)(1.0 / (1.0 - p));                                                    \
        const int nt = rumus_threads_for(n);                                                     \
        RUMUS_PARALLEL_FOR                                                                       \
        for (int t = 0; t < nt; t++) {                                                           \
            const int64_t s = n * t / nt, e = n * (t + 1) / nt;                                  \
            dropout_range_##sfx(o + s, x + s, e - s, offset + (uint32_t)s, key, thr, scale);     \
        }                                                                                        \
    }

DEF_DROPOUT(f32, float)
DEF_DROPOUT(f64, double)

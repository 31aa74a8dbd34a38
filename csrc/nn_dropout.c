/* Counter-based dropout: keep(i) is a hash of (seed, offset + i), so every backend draws the same mask
   from the same seed and the backward pass recomputes it (see rumus_contracts/ops/nn.py). */
#include "internal/dropout_hash.h"
#include "internal/half.h"
#include "internal/rumus.h"
#include "nn_dropout.h"

/* One piece [0, len) of the tensor, whose first element has counter value `base`; branch-free,
   so gcc vectorises the hash (and compiles an AVX2 clone). T is stored, C computed in (float16/bfloat16:
   float, the kept value x * scale rounded once). */
#define DEF_DROPOUT(sfx, T, C, LD, ST)                                                           \
    RUMUS_CLONES static void dropout_range_##sfx(T *out, const T *in, int64_t len, uint32_t base, \
                                                 uint32_t key, uint32_t thr, C scale) {          \
        for (int64_t i = 0; i < len; i++) {                                                      \
            const uint32_t bits = rumus_drop_bits(key, base + (uint32_t)i);                      \
            const C v = LD(in[i]) * scale;                                                       \
            out[i] = ST(bits >= thr ? v : (C)0);                                                 \
        }                                                                                        \
    }                                                                                            \
    typedef struct {                                                                             \
        T *o;                                                                                    \
        const T *x;                                                                              \
        uint32_t offset, key, thr;                                                               \
        C scale;                                                                                 \
    } dropout_job_##sfx;                                                                         \
    /* elements [s, e) on the pool: each element's value depends on its position only */         \
    static void dropout_pool_range_##sfx(void *p, int64_t s, int64_t e) {                        \
        const dropout_job_##sfx *j = (const dropout_job_##sfx *)p;                               \
        dropout_range_##sfx(j->o + s, j->x + s, e - s, j->offset + (uint32_t)s, j->key, j->thr, j->scale); \
    }                                                                                            \
    void rumus_dropout_##sfx(T *o, const T *x, int64_t n, double p, uint32_t seed, uint32_t offset) { \
        const uint32_t key = rumus_drop_key(seed), thr = rumus_drop_threshold(p);                \
        const C scale = (C)(1.0 / (1.0 - p));                                                    \
        const int nt = rumus_threads_for(n);                                                     \
        dropout_job_##sfx j = {o, x, offset, key, thr, scale};                                   \
        rumus_parallel_for(nt, n, dropout_pool_range_##sfx, &j);                                 \
    }

DEF_DROPOUT(f32, float, float, RUMUS_AS_IS, RUMUS_AS_IS)
DEF_DROPOUT(f64, double, double, RUMUS_AS_IS, RUMUS_AS_IS)
DEF_DROPOUT(f16, uint16_t, float, rumus_h2f, rumus_f2h)
DEF_DROPOUT(bf16, uint16_t, float, rumus_bf2f, rumus_f2bf)

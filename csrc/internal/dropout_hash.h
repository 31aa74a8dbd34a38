/* The counter-based dropout mask shared by the dropout op and flash attention's attention dropout:
   element i is kept when rumus_drop_bits(key, offset + i) >= rumus_drop_threshold(p), with
   key = rumus_drop_key(seed), so both (and every backend) draw the same mask from the same seed. */
#ifndef RUMUS_DROPOUT_HASH_H
#define RUMUS_DROPOUT_HASH_H

#include <stdint.h>

static inline uint32_t rumus_mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x21F0AAADu;
    h ^= h >> 15;
    h *= 0x735A2D97u;
    h ^= h >> 15;
    return h;
}

static inline uint32_t rumus_drop_key(uint32_t seed) { return rumus_mix32(seed ^ 0x9E3779B9u); }

static inline uint32_t rumus_drop_bits(uint32_t key, uint32_t counter) {
    return rumus_mix32(rumus_mix32(counter ^ key) + key);
}

/* p of the 2^32 hash values fall below it */
static inline uint32_t rumus_drop_threshold(double p) {
    const double t = p * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

#endif

/* FlashAttention on the CPU: the same tiled online-softmax algorithm as the WGSL kernels (see
   rumus_contracts/ops/attention.py), never an [L, S] buffer. The forward walks key tiles for a block of
   queries at a time (the K/V tile is packed once and reused by every query of the block); the backward is
   FlashAttention-2's: a dK/dV pass over key blocks and a dQ pass over query blocks, both recomputing the
   probabilities from lse. The kernels' pool runs blocks of (batch * head, query or key block) in parallel; each block
   is computed the same way whichever thread runs it, so results do not depend on the thread count. */
#include "internal/dropout_hash.h"
#include "internal/rumus.h"
#include <stdatomic.h>
#include <stdlib.h>
#include "flash_attention.h"

enum { FA_BQ = 32, FA_BK = 64 };

/* dims: B, H, L, S, D. strides (elements): q[4], k[4], v[4], bias[4] (0 on broadcast dims), kb[2], dout[4]. */
typedef struct {
    int64_t B, H, L, S, D;
    const int64_t *qs, *ks, *vs, *bs, *kbs, *dos;
    int causal;
    double scale;
    /* dropout */
    int drop;
    uint32_t key, thr, offset;
    double inv_keep;
} fa_cfg;

static void fa_config(fa_cfg *c, const int64_t *dims, const int64_t *strides, int is_causal, double scale,
                      double p, uint32_t seed, uint32_t offset) {
    c->B = dims[0]; c->H = dims[1]; c->L = dims[2]; c->S = dims[3]; c->D = dims[4];
    c->qs = strides; c->ks = strides + 4; c->vs = strides + 8; c->bs = strides + 12; c->kbs = strides + 16;
    c->dos = strides + 18;
    c->causal = is_causal;
    c->scale = scale;
    c->drop = p > 0.0;
    c->key = rumus_drop_key(seed);
    c->thr = rumus_drop_threshold(p);
    c->offset = offset;
    c->inv_keep = 1.0 / (1.0 - p);
}

/* keep / (1 - p) for probability element ((b * H + h) * L + i) * S + j (the dropout op's counter). */
static inline double fa_drop(const fa_cfg *c, int64_t bh, int64_t i, int64_t j) {
    const uint32_t idx = (uint32_t)((uint64_t)((bh * c->L + i) * c->S + j));
    const uint32_t bits = rumus_drop_bits(c->key, c->offset + idx);
    return bits >= c->thr ? c->inv_keep : 0.0;
}

/* the exponential in the element type: expf for float32 (its error is far below float32's tolerances) */
#define FA_T float
#define FA_SFX f32
#define FA_EXP expf
#include "internal/flash_attention_body.h"
#undef FA_T
#undef FA_SFX
#undef FA_EXP

#define FA_T double
#define FA_SFX f64
#define FA_EXP exp
#include "internal/flash_attention_body.h"
#undef FA_T
#undef FA_SFX
#undef FA_EXP

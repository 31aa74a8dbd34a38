/* The FlashAttention kernels for one element type; csrc/flash_attention.c includes this once per dtype with
   FA_T (the C type) and FA_SFX (the name suffix) defined. Tiles are packed contiguous before use, so
   strided q, k, v and dout cost one gather per tile, not one per use. */
#define FA_CAT2(a, b) a##_##b
#define FA_CAT(a, b) FA_CAT2(a, b)
#define FA_FN(name) FA_CAT(name, FA_SFX)

/* rows [r0, r0 + n) of the [rows, D] matrix at base (row stride rs, element stride es) into dst [n, D] */
static void FA_FN(fa_pack)(FA_T *dst, const FA_T *base, int64_t r0, int64_t n, int64_t D, int64_t rs, int64_t es) {
    for (int64_t r = 0; r < n; r++) {
        const FA_T *src = base + (r0 + r) * rs;
        if (es == 1) {
            memcpy(dst + r * D, src, (size_t)D * sizeof(FA_T));
        } else {
            for (int64_t d = 0; d < D; d++) dst[r * D + d] = src[d * es];
        }
    }
}

/* the same rows transposed: dst[d * FA_BK + r], so a query row meets a whole tile in one vector loop */
static void FA_FN(fa_pack_t)(FA_T *dst, const FA_T *base, int64_t r0, int64_t n, int64_t D, int64_t rs,
                             int64_t es) {
    for (int64_t r = 0; r < n; r++) {
        const FA_T *src = base + (r0 + r) * rs;
        for (int64_t d = 0; d < D; d++) dst[d * FA_BK + r] = src[d * es];
    }
}

/* out[t] = x . tile row t for the n rows of a transposed tile: the loop over t is contiguous (vectorised,
   no horizontal sums), summing over d in order, so the bits do not depend on the machine's vector width */
static inline void FA_FN(fa_rowdots)(FA_T *out, const FA_T *x, const FA_T *tT, int64_t n, int64_t D) {
    for (int64_t t = 0; t < n; t++) out[t] = 0;
    for (int64_t d = 0; d < D; d++) {
        const FA_T xd = x[d];
        const FA_T *td = tT + d * FA_BK;
        for (int64_t t = 0; t < n; t++) out[t] += xd * td[t];
    }
}

/* raw dot products s[t] of query i with keys j0 + t into scores: scale, biases, -inf where masked */
static inline void FA_FN(fa_finish_scores)(const fa_cfg *c, FA_T *s, int64_t n, const FA_T *bias, const FA_T *kb,
                                           int64_t i, int64_t j0) {
    const FA_T scale = (FA_T)c->scale;
    const FA_T *brow = bias + i * c->bs[2];
    for (int64_t t = 0; t < n; t++) {
        const int64_t j = j0 + t;
        s[t] = (c->causal && j > i) ? (FA_T)-INFINITY : s[t] * scale + brow[j * c->bs[3]] + kb[j * c->kbs[1]];
    }
}

/* workspace of one block, in elements */
static size_t FA_FN(fa_workspace)(int64_t D) {
    return (size_t)((3 * FA_BQ + 4 * FA_BK) * D + 2 * FA_BK);
}

RUMUS_CLONES static void FA_FN(fa_forward_block)(const fa_cfg *c, const FA_T *q, const FA_T *k, const FA_T *v,
                                                 const FA_T *bias, const FA_T *kb, FA_T *out, FA_T *lse, int64_t bh,
                                                 int64_t i0, FA_T *w) {
    const int64_t D = c->D, L = c->L, S = c->S, b = bh / c->H, h = bh % c->H;
    const int64_t nq = L - i0 < FA_BQ ? L - i0 : FA_BQ;
    FA_T *qt = w, *kT = qt + FA_BQ * D, *vt = kT + FA_BK * D, *acc = vt + FA_BK * D, *st = acc + FA_BQ * D;
    double m[FA_BQ], l[FA_BQ];
    const FA_T *bb = bias + b * c->bs[0] + h * c->bs[1], *kbb = kb + b * c->kbs[0];
    FA_FN(fa_pack)(qt, q + b * c->qs[0] + h * c->qs[1], i0, nq, D, c->qs[2], c->qs[3]);
    for (int64_t r = 0; r < nq; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0;
    }
    memset(acc, 0, (size_t)(nq * D) * sizeof(FA_T));
    const int64_t jend = c->causal ? (i0 + nq < S ? i0 + nq : S) : S;
    for (int64_t j0 = 0; j0 < jend; j0 += FA_BK) {
        const int64_t nk = jend - j0 < FA_BK ? jend - j0 : FA_BK;
        FA_FN(fa_pack_t)(kT, k + b * c->ks[0] + h * c->ks[1], j0, nk, D, c->ks[2], c->ks[3]);
        FA_FN(fa_pack)(vt, v + b * c->vs[0] + h * c->vs[1], j0, nk, D, c->vs[2], c->vs[3]);
        for (int64_t r = 0; r < nq; r++) {
            const int64_t i = i0 + r;
            FA_FN(fa_rowdots)(st, qt + r * D, kT, nk, D);
            FA_FN(fa_finish_scores)(c, st, nk, bb, kbb, i, j0);
            FA_T top = (FA_T)-INFINITY;
            for (int64_t t = 0; t < nk; t++) top = st[t] > top ? st[t] : top;
            if (top == (FA_T)-INFINITY) continue;
            const double mnew = m[r] > (double)top ? m[r] : (double)top;
            const FA_T alpha = (FA_T)exp(m[r] - mnew);
            FA_T *a = acc + r * D;
            l[r] *= (double)alpha;
            for (int64_t d = 0; d < D; d++) a[d] *= alpha;
            for (int64_t t = 0; t < nk; t++) {
                FA_T pj = FA_EXP((FA_T)((double)st[t] - mnew));
                l[r] += (double)pj;
                if (c->drop) pj *= (FA_T)fa_drop(c, bh, i, j0 + t);
                if (pj == 0) continue;
                const FA_T *vj = vt + t * D;
                for (int64_t d = 0; d < D; d++) a[d] += pj * vj[d];
            }
            m[r] = mnew;
        }
    }
    for (int64_t r = 0; r < nq; r++) {
        const int64_t row = bh * L + i0 + r;
        const FA_T inv = l[r] > 0.0 ? (FA_T)(1.0 / l[r]) : (FA_T)0;
        for (int64_t d = 0; d < D; d++) out[row * D + d] = acc[r * D + d] * inv;
        lse[row] = l[r] > 0.0 ? (FA_T)(m[r] + log(l[r])) : (FA_T)-INFINITY;
    }
}

typedef struct {
    const fa_cfg *c;
    const FA_T *q, *k, *v, *bias, *kb;
    FA_T *out, *lse;
    int64_t qblocks;
    size_t wsize;
    atomic_int failed; /* a chunk got no workspace: its blocks were not computed */
} FA_FN(fa_fwd_job);

/* Blocks [b0, b1) of (batch * head, query block); one workspace for the chunk (every block sets what it
   reads of it). */
static void FA_FN(fa_forward_range)(void *p, int64_t b0, int64_t b1) {
    FA_FN(fa_fwd_job) *j = (FA_FN(fa_fwd_job) *)p;
    FA_T *w = (FA_T *)malloc(j->wsize);
    if (w == NULL) {
        atomic_store(&j->failed, 1); /* the caller reports it: never an output with blocks left unwritten */
        return;
    }
    for (int64_t blk = b0; blk < b1; blk++)
        FA_FN(fa_forward_block)(j->c, j->q, j->k, j->v, j->bias, j->kb, j->out, j->lse, blk / j->qblocks,
                                (blk % j->qblocks) * FA_BQ, w);
    free(w);
}

int FA_FN(rumus_flash_attention)(const FA_T *q, const FA_T *k, const FA_T *v, const FA_T *bias, const FA_T *kb,
                                  FA_T *out, FA_T *lse, const int64_t *dims, const int64_t *strides, int is_causal,
                                  double scale, double p, uint32_t seed, uint32_t offset) {
    fa_cfg c;
    fa_config(&c, dims, strides, is_causal, scale, p, seed, offset);
    const int64_t qblocks = (c.L + FA_BQ - 1) / FA_BQ, blocks = c.B * c.H * qblocks;
    if (blocks == 0) return 1;
    const int nt = rumus_threads_for_units_grain(blocks, c.B * c.H * c.L * c.S * c.D, RUMUS_GRAIN_LOOP_MACS);
    FA_FN(fa_fwd_job) j = {&c, q, k, v, bias, kb, out, lse, qblocks, FA_FN(fa_workspace)(c.D) * sizeof(FA_T), 0};
    rumus_parallel_for(nt, blocks, FA_FN(fa_forward_range), &j);
    return !atomic_load(&j.failed);
}

/* What both backward passes compute for query i (qi its q row, gi its dout row) against the nk keys of a
   transposed K and V tile from key j0: ds[t] = P (dP * dropout - D[i]) scale and pd[t] = P * dropout, 0
   where masked (P recomputed from the saved logsumexp li, FlashAttention-2). */
static inline void FA_FN(fa_ds_row)(const fa_cfg *c, FA_T *ds, FA_T *pd, const FA_T *qi, const FA_T *gi,
                                    const FA_T *kT, const FA_T *vT, int64_t nk, const FA_T *bb, const FA_T *kbb,
                                    int64_t bh, int64_t i, int64_t j0, FA_T li, FA_T di) {
    const FA_T scale = (FA_T)c->scale;
    FA_FN(fa_rowdots)(ds, qi, kT, nk, c->D);
    FA_FN(fa_finish_scores)(c, ds, nk, bb, kbb, i, j0);
    FA_FN(fa_rowdots)(pd, gi, vT, nk, c->D);
    for (int64_t t = 0; t < nk; t++) {
        if (ds[t] == (FA_T)-INFINITY) {
            ds[t] = pd[t] = 0;
            continue;
        }
        const FA_T pij = FA_EXP(ds[t] - li);
        const FA_T f = c->drop ? (FA_T)fa_drop(c, bh, i, j0 + t) : (FA_T)1;
        ds[t] = pij * (pd[t] * f - di) * scale;
        pd[t] = pij * f;
    }
}

/* The backward's arrays; fa_at_head moves the inputs to one head (the outputs stay whole). */
typedef struct {
    const FA_T *q, *k, *v, *dout, *lse, *drow, *bias, *kb;
    FA_T *dq, *dk, *dv;
} FA_FN(fa_bwd);

/* q, k, v, dout, bias and the key bias at head bh = (b, h); lse and drow at its first query row */
static FA_FN(fa_bwd) FA_FN(fa_at_head)(const fa_cfg *c, const FA_FN(fa_bwd) *all, int64_t bh) {
    const int64_t b = bh / c->H, h = bh % c->H;
    FA_FN(fa_bwd) a = *all;
    a.q += b * c->qs[0] + h * c->qs[1];
    a.k += b * c->ks[0] + h * c->ks[1];
    a.v += b * c->vs[0] + h * c->vs[1];
    a.dout += b * c->dos[0] + h * c->dos[1];
    a.bias += b * c->bs[0] + h * c->bs[1];
    a.kb += b * c->kbs[0];
    a.lse += bh * c->L;
    a.drow += bh * c->L;
    return a;
}

/* dK and dV of key block [j0, j0 + FA_BQ): every query that may see it, FA_BK queries per packed tile. */
RUMUS_CLONES static void FA_FN(fa_dkdv_block)(const fa_cfg *c, const FA_FN(fa_bwd) *all, int64_t bh, int64_t j0,
                                              FA_T *w) {
    const FA_FN(fa_bwd) a = FA_FN(fa_at_head)(c, all, bh);
    const int64_t D = c->D, L = c->L, nk = c->S - j0 < FA_BQ ? c->S - j0 : FA_BQ;
    FA_T *kT = w, *vT = kT + FA_BK * D, *gk = vT + FA_BK * D, *gv = gk + FA_BQ * D, *qt = gv + FA_BQ * D;
    FA_T *ot = qt + FA_BK * D, *sr = ot + FA_BK * D, *dpr = sr + FA_BK;
    FA_FN(fa_pack_t)(kT, a.k, j0, nk, D, c->ks[2], c->ks[3]);
    FA_FN(fa_pack_t)(vT, a.v, j0, nk, D, c->vs[2], c->vs[3]);
    memset(gk, 0, (size_t)(2 * FA_BQ * D) * sizeof(FA_T));
    for (int64_t i0 = c->causal ? j0 : 0; i0 < L; i0 += FA_BK) {
        const int64_t ni = L - i0 < FA_BK ? L - i0 : FA_BK;
        FA_FN(fa_pack)(qt, a.q, i0, ni, D, c->qs[2], c->qs[3]);
        FA_FN(fa_pack)(ot, a.dout, i0, ni, D, c->dos[2], c->dos[3]);
        for (int64_t r = 0; r < ni; r++) {
            if (a.lse[i0 + r] == (FA_T)-INFINITY) continue;
            const FA_T *qi = qt + r * D, *gi = ot + r * D;
            FA_FN(fa_ds_row)(c, sr, dpr, qi, gi, kT, vT, nk, a.bias, a.kb, bh, i0 + r, j0, a.lse[i0 + r],
                             a.drow[i0 + r]);
            for (int64_t t = 0; t < nk; t++) {
                if (sr[t] == 0 && dpr[t] == 0) continue;
                FA_T *x = gk + t * D, *y = gv + t * D;
                for (int64_t d = 0; d < D; d++) x[d] += sr[t] * qi[d];
                for (int64_t d = 0; d < D; d++) y[d] += dpr[t] * gi[d];
            }
        }
    }
    memcpy(all->dk + (bh * c->S + j0) * D, gk, (size_t)(nk * D) * sizeof(FA_T));
    memcpy(all->dv + (bh * c->S + j0) * D, gv, (size_t)(nk * D) * sizeof(FA_T));
}

/* dQ of query block [i0, i0 + FA_BQ): every key it may see, FA_BK keys per packed tile. */
RUMUS_CLONES static void FA_FN(fa_dq_block)(const fa_cfg *c, const FA_FN(fa_bwd) *all, int64_t bh, int64_t i0,
                                            FA_T *w) {
    const FA_FN(fa_bwd) a = FA_FN(fa_at_head)(c, all, bh);
    const int64_t D = c->D, S = c->S, nq = c->L - i0 < FA_BQ ? c->L - i0 : FA_BQ;
    FA_T *qt = w, *ot = qt + FA_BQ * D, *gq = ot + FA_BQ * D, *kt = gq + FA_BQ * D, *kT = kt + FA_BK * D;
    FA_T *vT = kT + FA_BK * D, *sr = vT + FA_BK * D, *dpr = sr + FA_BK;
    FA_FN(fa_pack)(qt, a.q, i0, nq, D, c->qs[2], c->qs[3]);
    FA_FN(fa_pack)(ot, a.dout, i0, nq, D, c->dos[2], c->dos[3]);
    memset(gq, 0, (size_t)(FA_BQ * D) * sizeof(FA_T));
    const int64_t jend = c->causal ? (i0 + nq < S ? i0 + nq : S) : S;
    for (int64_t j0 = 0; j0 < jend; j0 += FA_BK) {
        const int64_t nk = jend - j0 < FA_BK ? jend - j0 : FA_BK;
        FA_FN(fa_pack)(kt, a.k, j0, nk, D, c->ks[2], c->ks[3]);
        FA_FN(fa_pack_t)(kT, a.k, j0, nk, D, c->ks[2], c->ks[3]);
        FA_FN(fa_pack_t)(vT, a.v, j0, nk, D, c->vs[2], c->vs[3]);
        for (int64_t r = 0; r < nq; r++) {
            const int64_t i = i0 + r;
            if (a.lse[i] == (FA_T)-INFINITY) continue;
            FA_FN(fa_ds_row)(c, sr, dpr, qt + r * D, ot + r * D, kT, vT, nk, a.bias, a.kb, bh, i, j0, a.lse[i],
                             a.drow[i]);
            FA_T *g = gq + r * D;
            for (int64_t t = 0; t < nk; t++) {
                if (sr[t] == 0) continue;
                const FA_T *kj = kt + t * D;
                for (int64_t d = 0; d < D; d++) g[d] += sr[t] * kj[d];
            }
        }
    }
    memcpy(all->dq + (bh * c->L + i0) * D, gq, (size_t)(nq * D) * sizeof(FA_T));
}

typedef struct {
    const fa_cfg *c;
    const FA_FN(fa_bwd) *all;
    /* the pass: fa_dkdv_block over key blocks or fa_dq_block over query blocks, `blocks` per (batch, head) */
    void (*block)(const fa_cfg *, const FA_FN(fa_bwd) *, int64_t, int64_t, FA_T *);
    int64_t blocks;
    size_t wsize;
    atomic_int failed;
} FA_FN(fa_bwd_job);

static void FA_FN(fa_bwd_range)(void *p, int64_t b0, int64_t b1) {
    FA_FN(fa_bwd_job) *j = (FA_FN(fa_bwd_job) *)p;
    FA_T *w = (FA_T *)malloc(j->wsize);
    if (w == NULL) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t blk = b0; blk < b1; blk++) j->block(j->c, j->all, blk / j->blocks, (blk % j->blocks) * FA_BQ, w);
    free(w);
}

int FA_FN(rumus_flash_attention_backward)(const FA_T *q, const FA_T *k, const FA_T *v, const FA_T *out,
                                           const FA_T *dout, const FA_T *lse, const FA_T *bias, const FA_T *kb,
                                           FA_T *dq, FA_T *dk, FA_T *dv, const int64_t *dims,
                                           const int64_t *strides, int is_causal, double scale, double p,
                                           uint32_t seed, uint32_t offset) {
    fa_cfg c;
    fa_config(&c, dims, strides, is_causal, scale, p, seed, offset);
    const int64_t BH = c.B * c.H, L = c.L, S = c.S, D = c.D;
    if (BH * L * D == 0) {
        if (BH * S * D != 0) { /* no queries: nothing reaches k and v */
            memset(dk, 0, (size_t)(BH * S * D) * sizeof(FA_T));
            memset(dv, 0, (size_t)(BH * S * D) * sizeof(FA_T));
        }
        return 1;
    }
    /* D[row] = dout[row] . out[row] (out is contiguous), the only O(L) scratch */
    FA_T *drow = (FA_T *)malloc((size_t)(BH * L) * sizeof(FA_T));
    if (drow == NULL) return 0; /* no gradient at all: the caller raises */
    for (int64_t bh = 0; bh < BH; bh++) {
        const FA_T *g = dout + (bh / c.H) * c.dos[0] + (bh % c.H) * c.dos[1];
        for (int64_t i = 0; i < L; i++) {
            FA_T s = 0;
            for (int64_t d = 0; d < D; d++) s += g[i * c.dos[2] + d * c.dos[3]] * out[(bh * L + i) * D + d];
            drow[bh * L + i] = s;
        }
    }
    const FA_FN(fa_bwd) all = {q, k, v, dout, lse, drow, bias, kb, dq, dk, dv};
    const int nt = rumus_threads_for_grain(BH * L * S * D, RUMUS_GRAIN_LOOP_MACS);
    const int64_t kblocks = (S + FA_BQ - 1) / FA_BQ, qblocks = (L + FA_BQ - 1) / FA_BQ;
    FA_FN(fa_bwd_job) j = {&c, &all, FA_FN(fa_dkdv_block), kblocks, FA_FN(fa_workspace)(D) * sizeof(FA_T), 0};
    rumus_parallel_for(nt, BH * kblocks, FA_FN(fa_bwd_range), &j);
    j.block = FA_FN(fa_dq_block);
    j.blocks = qblocks;
    rumus_parallel_for(nt, BH * qblocks, FA_FN(fa_bwd_range), &j);
    free(drow);
    return !atomic_load(&j.failed);
}

#undef FA_CAT2
#undef FA_CAT
#undef FA_FN

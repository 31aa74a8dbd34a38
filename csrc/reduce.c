/* Reductions (sum, prod, amax, amin) and argmax/argmin, writing the keepdim output.

   The Python side lists kept dims and reduced dims separately (meta, see rumus_rlayout), each
   collapsed, so a kernel sees "outer x inner" with strides.  Three strategies, chosen from the
   sizes only (never from the thread count, so results do not depend on RUMUS_NUM_THREADS):
     columns  -- the kept innermost dim is contiguous but the reduced one is not (sum over dim 0):
                 accumulate blocks of contiguous outputs row by row, cache friendly;
     split    -- few outputs with long reductions: 64 fixed chunks reduced in parallel, then combined;
     outputs  -- otherwise one output at a time (in parallel across outputs).
   Contiguous runs use LANES interleaved accumulators (vectorised) combined as a tree. float32 sums
   and products accumulate in double; integer and bool ones in int64; float16/bfloat16 load into float
   (LD), accumulate and compare in float and round the result once (ST). */
#include "internal/rumus.h"
#include "internal/half.h"
#include "reduce.h"

#define COLUMN_BLOCK 2048 /* most outputs accumulated together: 16 KiB of double accumulators */
#define LANES 16
#define SPLIT_CHUNKS 64

typedef void (*reduce_fn)(const rumus_rlayout *L, char *o, const char *x);
typedef struct {
    const char *name;
    reduce_fn fn;
    int osz, xsz;
} reduce_entry;

typedef void (*outputs_fn)(const rumus_rlayout *L, char *o, const char *x, int64_t s, int64_t e);

/* One reduction's loop on the pool (csrc/pool.c): its operands, and the per-range function (outputs) or
   the column block width (columns). */
typedef struct {
    const rumus_rlayout *L;
    char *o;
    const char *x;
    outputs_fn fn;
    int64_t bs;
} reduce_job;

static void outputs_range(void *p, int64_t s, int64_t e) {
    const reduce_job *j = (const reduce_job *)p;
    j->fn(j->L, j->o, j->x, s, e);
}

/* outputs [0, outer) split over nt threads, never more threads than outputs; each output is computed
   whole by one thread, so the split never changes a result */
static void run_outputs(const rumus_rlayout *L, char *o, const char *x, int nt, outputs_fn fn) {
    if (nt > L->outer) nt = (int)L->outer;
    reduce_job job = {L, o, x, fn, 0};
    rumus_parallel_for(nt, L->outer, outputs_range, &job);
}

#define ACC_SUM(a, v) ((a) += (v))
#define ACC_PROD(a, v) ((a) *= (v))
/* NaN wins (x != x folds away for integers); written as selects so loops vectorise */
#define ACC_MAX(a, v) ((a) = ((v) > (a) || (v) != (v)) ? (v) : (a))
#define ACC_MIN(a, v) ((a) = ((v) < (a) || (v) != (v)) ? (v) : (a))

/* One reduction (op, input type TI, accumulator TA, output TO; LD loads a TI, ST stores into a TO). */
#define DEF_REDUCE(NAME, TI, TA, TO, INIT, ACC, LD, ST)                                                         \
    /* a contiguous run: LANES interleaved accumulators (vectorised), then combined as a tree */        \
    RUMUS_CLONES static TA NAME##_contig(const TI *v, int64_t n) {                                      \
        TA lane[LANES];                                                                                 \
        for (int j = 0; j < LANES; j++) lane[j] = (INIT);                                               \
        int64_t i = 0;                                                                                  \
        for (; i + LANES <= n; i += LANES) {                                                            \
            const TI *w = v + i;                                                                        \
            /* kept a loop (not unrolled into scalars) so the vectoriser takes it */                    \
            _Pragma("GCC unroll 1") for (int j = 0; j < LANES; j++) ACC(lane[j], (TA)LD(w[j]));          \
        }                                                                                               \
        for (int j = 0; i < n; i++, j++) ACC(lane[j], (TA)LD(v[i]));                                    \
        for (int w = LANES / 2; w > 0; w /= 2)                                                          \
            for (int j = 0; j < w; j++) ACC(lane[j], lane[j + w]);                                      \
        return lane[0];                                                                                 \
    }                                                                                                   \
    static TA NAME##_part(const char *x, const rumus_rlayout *L, int64_t start, int64_t end) {          \
        TA acc = (INIT);                                                                                \
        if (start >= end) return acc;                                                                   \
        const int nr = L->nr;                                                                           \
        if (nr == 0) {                                                                                  \
            ACC(acc, (TA)LD(*(const TI *)x));                                                           \
            return acc;                                                                                 \
        }                                                                                               \
        const int last = nr - 1;                                                                        \
        const int64_t st = L->rin[last];                                                                \
        int64_t idx[RUMUS_MAX_DIMS], rem = start;                                                       \
        for (int d = last; d >= 0; d--) {                                                               \
            idx[d] = rem % L->rsh[d];                                                                   \
            rem /= L->rsh[d];                                                                           \
        }                                                                                               \
        int64_t pos = start;                                                                            \
        while (pos < end) {                                                                             \
            const char *q = x;                                                                          \
            for (int d = 0; d < nr; d++) q += idx[d] * L->rin[d];                                       \
            int64_t n = L->rsh[last] - idx[last];                                                       \
            if (n > end - pos) n = end - pos;                                                           \
            if (st == (int64_t)sizeof(TI)) {                                                            \
                ACC(acc, NAME##_contig((const TI *)q, n));                                              \
            } else {                                                                                    \
                for (int64_t i = 0; i < n; i++) ACC(acc, (TA)LD(*(const TI *)(q + i * st)));            \
            }                                                                                           \
            pos += n;                                                                                   \
            idx[last] += n;                                                                             \
            if (idx[last] >= L->rsh[last]) {                                                            \
                idx[last] = 0;                                                                          \
                for (int d = last - 1; d >= 0; d--) {                                                   \
                    if (++idx[d] < L->rsh[d]) break;                                                    \
                    idx[d] = 0;                                                                         \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        return acc;                                                                                     \
    }                                                                                                   \
    static void NAME##_outputs(const rumus_rlayout *L, char *o, const char *x, int64_t s, int64_t e) {  \
        rumus_kept_iter it;                                                                             \
        rumus_kept_start(L, L->nk, s, &it);                                                             \
        const int64_t n = L->nr == 1 ? L->rsh[0] : 0, st = L->nr == 1 ? L->rin[0] : 0;                  \
        for (int64_t i = s; i < e; i++, rumus_kept_next(L, L->nk, &it)) {                               \
            TA acc;                                                                                     \
            if (L->nr == 1 && !(st == (int64_t)sizeof(TI) && n >= 4 * LANES)) {                         \
                /* one short or strided reduced dim: a plain loop */                                    \
                const char *q = x + it.xo;                                                              \
                acc = (INIT);                                                                           \
                for (int64_t j = 0; j < n; j++) ACC(acc, (TA)LD(*(const TI *)(q + j * st)));            \
            } else {                                                                                    \
                acc = NAME##_part(x + it.xo, L, 0, L->inner);                                           \
            }                                                                                           \
            *(TO *)(o + it.oo) = (TO)ST(acc);                                                           \
        }                                                                                               \
    }                                                                                                   \
    RUMUS_CLONES static void NAME##_columns(const rumus_rlayout *L, char *o, const char *x, int64_t bs, int64_t s, \
                                            int64_t e) {                                                \
        const int64_t K = L->ksh[L->nk - 1], nb = (K + bs - 1) / bs;                                    \
        const int nr = L->nr;                                                                           \
        TA acc[COLUMN_BLOCK];                                                                           \
        for (int64_t u = s; u < e; u++) {                                                               \
            const int64_t j0 = (u % nb) * bs;                                                           \
            const int64_t bl = K - j0 < bs ? K - j0 : bs;                                               \
            int64_t oo, xo;                                                                             \
            rumus_kept_offsets(L, L->nk - 1, u / nb, &oo, &xo);                                         \
            for (int64_t j = 0; j < bl; j++) acc[j] = (INIT);                                           \
            const char *base = x + xo + j0 * (int64_t)sizeof(TI);                                       \
            int64_t ridx[RUMUS_MAX_DIMS] = {0}, roff = 0;                                               \
            for (int64_t r = 0; r < L->inner; r++) {                                                    \
                const TI *v = (const TI *)(base + roff);                                                \
                for (int64_t j = 0; j < bl; j++) ACC(acc[j], (TA)LD(v[j]));                             \
                for (int d = nr - 1; d >= 0; d--) {                                                     \
                    roff += L->rin[d];                                                                  \
                    if (++ridx[d] < L->rsh[d]) break;                                                   \
                    roff -= L->rin[d] * L->rsh[d];                                                      \
                    ridx[d] = 0;                                                                        \
                }                                                                                       \
            }                                                                                           \
            TO *out = (TO *)(o + oo) + j0;                                                              \
            for (int64_t j = 0; j < bl; j++) out[j] = (TO)ST(acc[j]);                                   \
        }                                                                                               \
    }                                                                                                   \
    static void NAME##_columns_range(void *p, int64_t s, int64_t e) {                                   \
        const reduce_job *j = (const reduce_job *)p;                                                    \
        NAME##_columns(j->L, j->o, j->x, j->bs, s, e);                                                  \
    }                                                                                                   \
    /* the split strategy's chunks of one output: parts[c] over its c-th 64th of the reduced elements */ \
    typedef struct {                                                                                    \
        const rumus_rlayout *L;                                                                         \
        const char *x;                                                                                  \
        TA *parts;                                                                                      \
    } NAME##_split_job;                                                                                 \
    static void NAME##_split_range(void *p, int64_t b, int64_t e) {                                     \
        const NAME##_split_job *j = (const NAME##_split_job *)p;                                        \
        const int64_t inner = j->L->inner;                                                              \
        for (int64_t c = b; c < e; c++)                                                                 \
            j->parts[c] = NAME##_part(j->x, j->L, inner * c / SPLIT_CHUNKS, inner * (c + 1) / SPLIT_CHUNKS); \
    }                                                                                                   \
    static void NAME(const rumus_rlayout *L, char *o, const char *x) {                                  \
        if (L->outer == 0) return;                                                                      \
        const int64_t work = L->outer * (L->inner > 0 ? L->inner : 1);                                  \
        int nt = rumus_threads_for(work);                                                               \
        if (L->nk >= 1 && L->nr >= 1 && L->inner > 0 && L->kin[L->nk - 1] == (int64_t)sizeof(TI) &&     \
            L->kout[L->nk - 1] == (int64_t)sizeof(TO) && L->rin[L->nr - 1] != (int64_t)sizeof(TI)) {    \
            /* blocks as wide as fit in L1, narrower when that leaves threads idle; each output         \
               still sums its column in row order, so the result never depends on the block */          \
            const int64_t K = L->ksh[L->nk - 1], rows = L->outer / K;                                   \
            int64_t bs = COLUMN_BLOCK;                                                                  \
            if (rows < nt) {                                                                            \
                const int64_t per = (K * rows + nt - 1) / nt;                                           \
                bs = per < 64 ? 64 : (per + 15) / 16 * 16;                                              \
                if (bs > COLUMN_BLOCK) bs = COLUMN_BLOCK;                                               \
            }                                                                                           \
            const int64_t units = rows * ((K + bs - 1) / bs);                                           \
            if (nt > units) nt = (int)units;                                                            \
            reduce_job job = {L, o, x, NULL, bs};                                                       \
            rumus_parallel_for(nt, units, NAME##_columns_range, &job);                                  \
            return;                                                                                     \
        }                                                                                               \
        if (L->outer < 16 && L->inner >= 65536) {                                                       \
            for (int64_t i = 0; i < L->outer; i++) {                                                    \
                int64_t oo, xo;                                                                         \
                rumus_kept_offsets(L, L->nk, i, &oo, &xo);                                              \
                TA parts[SPLIT_CHUNKS];                                                                 \
                /* parts[c] fixed by the shape, combined in c order below: any schedule */               \
                NAME##_split_job job = {L, x + xo, parts};                                              \
                rumus_parallel_for(nt, SPLIT_CHUNKS, NAME##_split_range, &job);                         \
                TA acc = (INIT);                                                                        \
                for (int c = 0; c < SPLIT_CHUNKS; c++) ACC(acc, parts[c]);                              \
                *(TO *)(o + oo) = (TO)ST(acc);                                                          \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        run_outputs(L, o, x, nt, NAME##_outputs);                                                       \
    }

/* Per dtype: suffix, input type, sum accumulator, sum output type, lowest value, highest value, the
   type values compare in (amax/amin), load, store. */
#define EACH_REDUCE(M)                                                                                  \
    M(f32, float, double, float, -INFINITY, INFINITY, float, RUMUS_AS_IS, RUMUS_AS_IS)                  \
    M(f64, double, double, double, -INFINITY, INFINITY, double, RUMUS_AS_IS, RUMUS_AS_IS)               \
    M(i64, int64_t, int64_t, int64_t, INT64_MIN, INT64_MAX, int64_t, RUMUS_AS_IS, RUMUS_AS_IS)          \
    M(i32, int32_t, int64_t, int64_t, INT32_MIN, INT32_MAX, int32_t, RUMUS_AS_IS, RUMUS_AS_IS)          \
    M(i16, int16_t, int64_t, int64_t, INT16_MIN, INT16_MAX, int16_t, RUMUS_AS_IS, RUMUS_AS_IS)          \
    M(i8, int8_t, int64_t, int64_t, INT8_MIN, INT8_MAX, int8_t, RUMUS_AS_IS, RUMUS_AS_IS)               \
    M(u8, uint8_t, int64_t, int64_t, 0, UINT8_MAX, uint8_t, RUMUS_AS_IS, RUMUS_AS_IS)                   \
    M(b, uint8_t, int64_t, int64_t, 0, 1, uint8_t, RUMUS_AS_IS, RUMUS_AS_IS)                            \
    M(f16, uint16_t, float, uint16_t, -INFINITY, INFINITY, float, rumus_h2f, rumus_f2h)                 \
    M(bf16, uint16_t, float, uint16_t, -INFINITY, INFINITY, float, rumus_bf2f, rumus_f2bf)

#define DEF_ALL_REDUCE(sfx, TI, TA, TO, LOW, HIGH, TX, LD, ST)                                          \
    DEF_REDUCE(sum_##sfx, TI, TA, TO, 0, ACC_SUM, LD, ST)                                               \
    DEF_REDUCE(prod_##sfx, TI, TA, TO, 1, ACC_PROD, LD, ST)                                             \
    DEF_REDUCE(amax_##sfx, TI, TX, TI, LOW, ACC_MAX, LD, ST)                                            \
    DEF_REDUCE(amin_##sfx, TI, TX, TI, HIGH, ACC_MIN, LD, ST)

/* argmax / argmin along one dim (nr <= 1); the first index wins ties, a NaN wins over numbers. */
#define DEF_ARG(NAME, TI, TX, LD, EXTREME, BETTER)                                                              \
    static void NAME##_outputs(const rumus_rlayout *L, char *o, const char *x, int64_t s, int64_t e) {  \
        const int64_t n = L->nr ? L->rsh[0] : 1, st = L->nr ? L->rin[0] : 0;                            \
        rumus_kept_iter it;                                                                             \
        rumus_kept_start(L, L->nk, s, &it);                                                             \
        for (int64_t i = s; i < e; i++, rumus_kept_next(L, L->nk, &it)) {                               \
            int64_t bi = 0;                                                                             \
            const char *q = x + it.xo;                                                                  \
            if (st == (int64_t)sizeof(TI) && n >= 4 * LANES) {                                          \
                /* contiguous: the extreme value (vectorised), then its first position */               \
                const TI *v = (const TI *)q;                                                            \
                const TX m = EXTREME##_contig(v, n);                                                    \
                if (m == m) {                                                                           \
                    while (bi < n - 1 && LD(v[bi]) != m) bi++;                                          \
                } else {                                                                                \
                    while (bi < n - 1 && LD(v[bi]) == LD(v[bi])) bi++;                                  \
                }                                                                                       \
            } else {                                                                                    \
                TX best = LD(*(const TI *)q);                                                           \
                for (int64_t j = 1; j < n; j++) {                                                       \
                    const TX v = LD(*(const TI *)(q + j * st));                                         \
                    const int better = (BETTER); /* selects, not branches: random data */               \
                    best = better ? v : best;                                                           \
                    bi = better ? j : bi;                                                               \
                }                                                                                       \
            }                                                                                           \
            *(int64_t *)(o + it.oo) = bi;                                                               \
        }                                                                                               \
    }                                                                                                   \
    static void NAME(const rumus_rlayout *L, char *o, const char *x) {                                  \
        if (L->outer == 0 || L->inner == 0) return;                                                     \
        int nt = rumus_threads_for(L->outer * L->inner);                                                \
        run_outputs(L, o, x, nt, NAME##_outputs);                                                       \
    }

#define DEF_ARGS(sfx, TI, TA, TO, LOW, HIGH, TX, LD, ST)                                                \
    DEF_ARG(argmax_##sfx, TI, TX, LD, amax_##sfx, (v > best) | ((v != v) & (best == best)))             \
    DEF_ARG(argmin_##sfx, TI, TX, LD, amin_##sfx, (v < best) | ((v != v) & (best == best)))

EACH_REDUCE(DEF_ALL_REDUCE)
EACH_REDUCE(DEF_ARGS)

#define ENT_ALL(sfx, TI, TA, TO, LOW, HIGH, ...)                                                         \
    {"sum_" #sfx, sum_##sfx, sizeof(TO), sizeof(TI)}, {"prod_" #sfx, prod_##sfx, sizeof(TO), sizeof(TI)}, \
    {"amax_" #sfx, amax_##sfx, sizeof(TI), sizeof(TI)}, {"amin_" #sfx, amin_##sfx, sizeof(TI), sizeof(TI)}, \
    {"argmax_" #sfx, argmax_##sfx, 8, sizeof(TI)}, {"argmin_" #sfx, argmin_##sfx, 8, sizeof(TI)},

static const reduce_entry TABLE[] = {EACH_REDUCE(ENT_ALL)};

int64_t rumus_reduce_find(const char *name) { return RUMUS_FIND_IN(TABLE, name); }

void rumus_reduce_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo) {
    const reduce_entry *e = &TABLE[loop];
    rumus_rlayout L;
    rumus_rlayout_parse(meta, e->osz, e->xsz, &L);
    e->fn(&L, o + oo * e->osz, x + xo * e->xsz);
}

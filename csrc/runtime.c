/* Threading policy and the generic strided N-d iterator every elementwise kernel runs on. */
#include "internal/rumus.h"
#include "runtime.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int g_threads = 1;
static int64_t g_threshold = 32768; /* below this many elements a kernel stays on one thread */

void rumus_set_num_threads(int n) {
#ifdef _OPENMP
    /* every parallel region names its team size (num_threads(...)); the process-wide OpenMP setting is
       left alone, since other libraries in the process (torch) share libgomp's ICVs */
    g_threads = n < 1 ? 1 : n;
#else
    RUMUS_UNUSED(n); /* built without OpenMP: always one thread */
#endif
}

int rumus_get_num_threads(void) { return g_threads; }

/* libgomp's thread pool does not survive fork(): a forked child that entered a parallel region
   would wait forever for threads it does not have. Children therefore run every kernel on their
   one thread (what PyTorch does too); no OpenMP call happens here. */
void rumus_after_fork_child(void) { g_threads = 1; }

int rumus_has_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

void rumus_set_parallel_threshold(int64_t elements) { g_threshold = elements < 1 ? 1 : elements; }
int64_t rumus_get_parallel_threshold(void) { return g_threshold; }

int rumus_threads_for(int64_t work) {
#ifdef _OPENMP
    if (g_threads <= 1 || work < g_threshold) return 1;
    int64_t most = work / (g_threshold / 2 > 0 ? g_threshold / 2 : 1); /* keep >= threshold/2 per thread */
    return most < g_threads ? (int)(most < 1 ? 1 : most) : g_threads;
#else
    RUMUS_UNUSED(work);
    return 1;
#endif
}

int64_t rumus_table_find(const rumus_loop_entry *table, int64_t count, const char *name) {
    for (int64_t i = 0; i < count; i++)
        if (strcmp(table[i].name, name) == 0) return i;
    return -1;
}

/* Elements [start, end) of the flattened (row-major) iteration space, one innermost run at a time. */
static void run_range(int nops, int ndim, const int64_t *shape, const int64_t *bst, char **base,
                      rumus_loop_fn fn, const void *ctx, int64_t start, int64_t end) {
    int64_t idx[RUMUS_MAX_DIMS];
    int64_t inner[RUMUS_MAX_OPS];
    char *p[RUMUS_MAX_OPS];
    const int last = ndim - 1;
    int64_t rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    for (int k = 0; k < nops; k++) inner[k] = bst[k * ndim + last];
    int64_t pos = start;
    while (pos < end) {
        for (int k = 0; k < nops; k++) {
            char *q = base[k];
            const int64_t *st = bst + k * ndim;
            for (int d = 0; d < ndim; d++) q += idx[d] * st[d];
            p[k] = q;
        }
        int64_t n = shape[last] - idx[last];
        if (n > end - pos) n = end - pos;
        fn(n, p, inner, ctx);
        pos += n;
        idx[last] += n;
        if (idx[last] >= shape[last]) {
            idx[last] = 0;
            for (int d = last - 1; d >= 0; d--) {
                if (++idx[d] < shape[d]) break;
                idx[d] = 0;
            }
        }
    }
}

/* Tiled walk over the last two dims, for operands laid out "across" the iteration order (a
   transposed read or write): TILE x TILE blocks keep both sides' cache lines in use.
   Work units are (position in the leading dims, band of TILE rows). */
#define TILE 64
static void run_tiles(int nops, int ndim, const int64_t *shape, const int64_t *bst, char **base, rumus_loop_fn fn,
                      const void *ctx, int64_t u0, int64_t u1) {
    const int r = ndim - 2, c = ndim - 1;
    const int64_t bands = (shape[r] + TILE - 1) / TILE;
    int64_t inner[RUMUS_MAX_OPS];
    char *p[RUMUS_MAX_OPS], *lead[RUMUS_MAX_OPS];
    for (int k = 0; k < nops; k++) inner[k] = bst[k * ndim + c];
    for (int64_t u = u0; u < u1; u++) {
        int64_t rem = u / bands;
        const int64_t i0 = (u % bands) * TILE, i1 = i0 + TILE < shape[r] ? i0 + TILE : shape[r];
        for (int k = 0; k < nops; k++) lead[k] = base[k];
        for (int d = r - 1; d >= 0; d--) {
            const int64_t q = rem % shape[d];
            rem /= shape[d];
            for (int k = 0; k < nops; k++) lead[k] += q * bst[k * ndim + d];
        }
        for (int64_t j0 = 0; j0 < shape[c]; j0 += TILE) {
            const int64_t n = shape[c] - j0 < TILE ? shape[c] - j0 : TILE;
            for (int64_t i = i0; i < i1; i++) {
                for (int k = 0; k < nops; k++) p[k] = lead[k] + i * bst[k * ndim + r] + j0 * inner[k];
                fn(n, p, inner, ctx);
            }
        }
    }
}

/* Whether some operand steps further along the last dim than along the one before it. */
static int crossed(int nops, int ndim, const int64_t *shape, const int64_t *bst) {
    if (ndim < 2 || shape[ndim - 1] < TILE / 2 || shape[ndim - 2] < TILE / 2) return 0;
    for (int k = 0; k < nops; k++) {
        const int64_t a = bst[k * ndim + ndim - 2], b = bst[k * ndim + ndim - 1];
        if (a != 0 && (b < 0 ? -b : b) > (a < 0 ? -a : a)) return 1;
    }
    return 0;
}

void rumus_iterate(int nops, const int64_t *meta, char **base, const int *isz, rumus_loop_fn fn,
                   const void *ctx) {
    const int ndim = (int)meta[0];
    const int64_t *shape = meta + 1;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    if (total <= 0) return;
    int64_t bst[RUMUS_MAX_OPS * RUMUS_MAX_DIMS];
    for (int k = 0; k < nops; k++)
        for (int d = 0; d < ndim; d++) bst[k * ndim + d] = meta[1 + ndim + k * ndim + d] * isz[k];
    if (ndim == 1) { /* the common case after collapsing: one run, no index bookkeeping */
        int nt = rumus_threads_for(total);
        if (nt <= 1) {
            fn(total, base, bst, ctx);
            return;
        }
        RUMUS_PARALLEL_FOR
        for (int t = 0; t < nt; t++) {
            /* chunk borders on multiples of 64 elements keep vector loops aligned */
            const int64_t s = (total * t / nt) & ~(int64_t)63;
            const int64_t e = t == nt - 1 ? total : (total * (t + 1) / nt) & ~(int64_t)63;
            if (e <= s) continue;
            char *p[RUMUS_MAX_OPS];
            for (int k = 0; k < nops; k++) p[k] = base[k] + s * bst[k];
            fn(e - s, p, bst, ctx);
        }
        return;
    }
    int nt = rumus_threads_for(total);
    if (crossed(nops, ndim, shape, bst)) {
        const int64_t units = total / (shape[ndim - 1] * shape[ndim - 2]) * ((shape[ndim - 2] + TILE - 1) / TILE);
        if (nt > units) nt = (int)units;
        if (nt <= 1) {
            run_tiles(nops, ndim, shape, bst, base, fn, ctx, 0, units);
            return;
        }
        RUMUS_PARALLEL_FOR
        for (int t = 0; t < nt; t++)
            run_tiles(nops, ndim, shape, bst, base, fn, ctx, units * t / nt, units * (t + 1) / nt);
        return;
    }
    if (nt <= 1) {
        run_range(nops, ndim, shape, bst, base, fn, ctx, 0, total);
        return;
    }
    RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        int64_t s = total * t / nt, e = total * (t + 1) / nt;
        if (e > s) run_range(nops, ndim, shape, bst, base, fn, ctx, s, e);
    }
}

void rumus_rlayout_parse(const int64_t *meta, int64_t osz, int64_t xsz, rumus_rlayout *L) {
    const int nk = (int)meta[0];
    const int64_t *m = meta + 1;
    L->nk = nk;
    L->outer = 1;
    for (int d = 0; d < nk; d++) {
        L->ksh[d] = m[d];
        L->kout[d] = m[nk + d] * osz;
        L->kin[d] = m[2 * nk + d] * xsz;
        L->outer *= m[d];
    }
    m += 3 * nk;
    const int nr = (int)m[0];
    m += 1;
    L->nr = nr;
    L->inner = 1;
    for (int d = 0; d < nr; d++) {
        L->rsh[d] = m[d];
        L->rin[d] = m[nr + d] * xsz;
        L->inner *= m[d];
    }
}

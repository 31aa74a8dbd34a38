/* Integer-indexed data movement: index_select / embedding rows (bytewise, any dtype), their accumulating
   backward index_add (floats; repeated indices add up), gather (any dtype) and scatter_add (floats).

   Indices are int64 (idx64 = 1) or int32 (idx64 = 0), contiguous.  Functions that can meet an index
   out of [0, size) return the flat position of the first bad one, or -1; the *_check variant runs first
   where the kernel itself must not fail half-way. */
#include "internal/rumus.h"
#include "nn_index.h"

static inline int64_t index_at(const void *idx, int idx64, int64_t i) {
    return idx64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

int64_t rumus_index_check(const void *idx, int idx64, int64_t count, int64_t size) {
    for (int64_t i = 0; i < count; i++) {
        const int64_t v = index_at(idx, idx64, i);
        if (v < 0 || v >= size) return i;
    }
    return -1;
}

typedef struct {
    char *out;
    const char *x;
    const void *idx;
    int idx64;
    int64_t n, k, inner_bytes;
} index_select_job;

/* output rows [s, e) */
static void index_select_range(void *p, int64_t s, int64_t e) {
    const index_select_job *q = (const index_select_job *)p;
    char *out = q->out;
    const char *x = q->x;
    const void *idx = q->idx;
    const int idx64 = q->idx64;
    const int64_t n = q->n, k = q->k, inner_bytes = q->inner_bytes;
    for (int64_t r = s; r < e; r++) {
        const int64_t o = r / k, j = r % k;
        memcpy(out + r * inner_bytes, x + (o * n + index_at(idx, idx64, j)) * inner_bytes, (size_t)inner_bytes);
    }
}

/* x viewed as [outer, n, inner] (contiguous), out as [outer, k, inner]; indices already checked. */
void rumus_index_select(char *out, const char *x, const void *idx, int idx64, int64_t outer, int64_t n, int64_t k,
                        int64_t inner_bytes) {
    const int64_t rows = outer * k;
    const int nt = rumus_threads_for(rows * inner_bytes / 4);
    index_select_job q = {out, x, idx, idx64, n, k, inner_bytes};
    rumus_parallel_for(nt, rows, index_select_range, &q);
}

/* out [outer, n, inner] += alpha * src [outer, k, inner] at the indexed rows; row skip_row (>= 0) is left
   alone (embedding's padding_idx).  Work is split into (outer, column block) tasks, each of which owns
   its output columns, so repeated indices never race. */
#define COLUMN_BLOCK 256
#define DEF_INDEX_ADD(sfx, T)                                                                    \
    typedef struct {                                                                             \
        T *out;                                                                                  \
        const T *src;                                                                            \
        const void *idx;                                                                         \
        int idx64;                                                                               \
        int64_t n, k, inner, blocks, skip_row;                                                   \
        T a;                                                                                     \
    } index_add_job_##sfx;                                                                       \
    /* tasks [ts, te): each task owns its output columns, so any split gives the same bits */    \
    static void index_add_range_##sfx(void *p, int64_t ts, int64_t te) {                         \
        const index_add_job_##sfx *q = (const index_add_job_##sfx *)p;                           \
        T *out = q->out;                                                                         \
        const T *src = q->src;                                                                   \
        const void *idx = q->idx;                                                                \
        const int idx64 = q->idx64;                                                              \
        const int64_t n = q->n, k = q->k, inner = q->inner, blocks = q->blocks, skip_row = q->skip_row; \
        const T a = q->a;                                                                        \
        for (int64_t task = ts; task < te; task++) {                                             \
            const int64_t o = task / blocks, c0 = (task % blocks) * COLUMN_BLOCK;                \
            const int64_t c1 = c0 + COLUMN_BLOCK < inner ? c0 + COLUMN_BLOCK : inner;            \
            for (int64_t j = 0; j < k; j++) {                                                    \
                const int64_t row = index_at(idx, idx64, j);                                     \
                if (row == skip_row) continue;                                                   \
                T *dst = out + (o * n + row) * inner;                                            \
                const T *s = src + (o * k + j) * inner;                                          \
                if (a == (T)1) {                                                                 \
                    for (int64_t c = c0; c < c1; c++) dst[c] += s[c];                            \
                } else {                                                                         \
                    for (int64_t c = c0; c < c1; c++) dst[c] += a * s[c];                        \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    void rumus_index_add_##sfx(T *out, const T *src, const void *idx, int idx64, int64_t outer, int64_t n, \
                               int64_t k, int64_t inner, double alpha, int64_t skip_row) {       \
        const int64_t blocks = (inner + COLUMN_BLOCK - 1) / COLUMN_BLOCK, tasks = outer * blocks; \
        const T a = (T)alpha;                                                                    \
        const int nt = rumus_threads_for(outer * k * inner) < tasks ? rumus_threads_for(outer * k * inner) \
                                                                    : (int)(tasks > 0 ? tasks : 1); \
        index_add_job_##sfx q = {out, src, idx, idx64, n, k, inner, blocks, skip_row, a};        \
        rumus_parallel_for(nt, tasks, index_add_range_##sfx, &q);                                \
    }

DEF_INDEX_ADD(f32, float)
DEF_INDEX_ADD(f64, double)

/* Odometer over an N-d index shape: calls BODY with p (flat position) and base (element offset of the
   position in the strided tensor, without the indexed dim). */
#define WALK(ndim, shape, strides, dim, ...)                                                    \
    do {                                                                                         \
        int64_t pos[RUMUS_MAX_DIMS] = {0}, total = 1, base = 0;                                  \
        for (int d = 0; d < (ndim); d++) total *= (shape)[d];                                    \
        for (int64_t p = 0; p < total; p++) {                                                    \
            __VA_ARGS__;                                                                              \
            for (int d = (ndim) - 1; d >= 0; d--) {                                              \
                if (d != (dim)) base += (strides)[d];                                            \
                if (++pos[d] < (shape)[d]) break;                                                \
                if (d != (dim)) base -= (strides)[d] * (shape)[d];                               \
                pos[d] = 0;                                                                      \
            }                                                                                    \
        }                                                                                        \
    } while (0)

int64_t rumus_gather(char *out, const char *x, const void *idx, int idx64, int isz, int ndim, const int64_t *shape,
                     const int64_t *xstrides, int dim, int64_t dimsize) {
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    const int64_t bad = rumus_index_check(idx, idx64, total, dimsize);
    if (bad >= 0) return bad;
    WALK(ndim, shape, xstrides, dim, {
        const int64_t off = base + index_at(idx, idx64, p) * xstrides[dim];
        memcpy(out + p * isz, x + off * isz, (size_t)isz);
    });
    return -1;
}

#define DEF_SCATTER_ADD(sfx, T)                                                                  \
    int64_t rumus_scatter_add_##sfx(T *out, const T *src, const void *idx, int idx64, int ndim,    \
                                    const int64_t *shape, const int64_t *ostrides, int dim, int64_t dimsize) { \
        int64_t total = 1;                                                                       \
        for (int d = 0; d < ndim; d++) total *= shape[d];                                        \
        const int64_t bad = rumus_index_check(idx, idx64, total, dimsize);                       \
        if (bad >= 0) return bad;                                                                \
        WALK(ndim, shape, ostrides, dim, { out[base + index_at(idx, idx64, p) * ostrides[dim]] += src[p]; }); \
        return -1;                                                                               \
    }

DEF_SCATTER_ADD(f32, float)
DEF_SCATTER_ADD(f64, double)

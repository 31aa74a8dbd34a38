/* Sparse graph kernels of rumus-graph. Every kernel gives each output row to exactly one thread
 * (OpenMP over CSR rows or segments), so no atomics are needed and results do not depend on the
 * thread count. Every index is checked before it is used: a kernel returns a nonzero RG_* code
 * instead of reading or writing outside a buffer, and the Python wrapper raises IndexOutOfRange. */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "graph_kernels.h"

#define RG_OK 0
#define RG_BAD_PTR 1   /* pointers not monotone, not starting at 0 or not ending at the entry count */
#define RG_BAD_IDX 2   /* a column / row index outside its dimension */
#define RG_BAD_EID 3   /* an entry id outside [0, nnz) */

/* Below this many multiply-adds a kernel stays on the calling thread (thread start-up costs more). */
#define RG_GRAIN 32768

/* The per-row loops are compiled twice on x86-64 glibc Linux (AVX2 and baseline SSE2; ifunc picks one at
 * load time), as the core's kernels are. -std=c11 implies -ffp-contract=off: no FMA, same bits either way. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define RG_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef RG_CLONES
#define RG_CLONES
#endif

static int check_ptr(const int32_t *ptr, int64_t n, int64_t total) {
    if (ptr[0] != 0 || ptr[n] != total) return RG_BAD_PTR;
    for (int64_t i = 0; i < n; i++)
        if (ptr[i + 1] < ptr[i]) return RG_BAD_PTR;
    return RG_OK;
}

/* out[i, :] = sum_{k in [ptr[i], ptr[i+1])} val[eid ? eid[k] : k] * x[idx[k], :]
 * (A @ X with eid == NULL over CSR; A.T @ X with the column-grouped arrays and their entry ids). */
#define DEF_SPMM(T, SFX)                                                                              \
RG_CLONES static int spmm_row_##SFX(const int32_t *ptr, const int32_t *idx, const int32_t *eid,        \
                                    const T *val, const T *x, T *restrict o, int64_t i, int64_t n_x,    \
                                    int64_t nnz, int64_t f) {                                          \
    int bad = 0;                                                                                      \
    for (int64_t j = 0; j < f; j++) o[j] = 0;                                                         \
    for (int64_t k = ptr[i]; k < ptr[i + 1]; k++) {                                                   \
        int64_t c = idx[k], e = eid ? eid[k] : k;                                                     \
        if (c < 0 || c >= n_x) { bad |= 1; continue; }                                                \
        if (e < 0 || e >= nnz) { bad |= 2; continue; }                                                \
        const T v = val[e];                                                                           \
        const T *restrict xr = x + c * f;                                                             \
        for (int64_t j = 0; j < f; j++) o[j] += v * xr[j];                                            \
    }                                                                                                 \
    return bad;                                                                                       \
}                                                                                                     \
int rg_spmm_##SFX(const int32_t *ptr, const int32_t *idx, const int32_t *eid, const T *val, const T *x, \
                  T *out, int64_t n_out, int64_t n_x, int64_t nnz, int64_t f) {                        \
    int rc = check_ptr(ptr, n_out, nnz);                                                              \
    if (rc) return rc;                                                                                \
    int bad = 0;                                                                                      \
    _Pragma("omp parallel for schedule(dynamic, 32) reduction(|:bad) if (nnz * f > RG_GRAIN)")        \
    for (int64_t i = 0; i < n_out; i++)                                                               \
        bad |= spmm_row_##SFX(ptr, idx, eid, val, x, out + i * f, i, n_x, nnz, f);                    \
    return (bad & 1) ? RG_BAD_IDX : (bad & 2) ? RG_BAD_EID : RG_OK;                                   \
}
DEF_SPMM(float, f32)
DEF_SPMM(double, f64)

/* out[k] = dot(a[row(k), :], b[col[k], :]) for every stored entry k (rows from rowptr). */
#define DEF_SDDMM(T, SFX)                                                                             \
int rg_sddmm_##SFX(const int32_t *rowptr, const int32_t *col, const T *a, const T *b, T *out,          \
                   int64_t n_rows, int64_t n_cols, int64_t nnz, int64_t f) {                          \
    int rc = check_ptr(rowptr, n_rows, nnz);                                                          \
    if (rc) return rc;                                                                                \
    int bad = 0;                                                                                      \
    _Pragma("omp parallel for schedule(dynamic, 32) reduction(|:bad) if (nnz * f > RG_GRAIN)")        \
    for (int64_t i = 0; i < n_rows; i++) {                                                            \
        const T *ar = a + i * f;                                                                      \
        for (int64_t k = rowptr[i]; k < rowptr[i + 1]; k++) {                                         \
            int64_t c = col[k];                                                                       \
            if (c < 0 || c >= n_cols) { bad = 1; out[k] = 0; continue; }                              \
            const T *br = b + c * f;                                                                  \
            T s = 0;                                                                                  \
            for (int64_t j = 0; j < f; j++) s += ar[j] * br[j];                                       \
            out[k] = s;                                                                               \
        }                                                                                             \
    }                                                                                                 \
    return bad ? RG_BAD_IDX : RG_OK;                                                                  \
}
DEF_SDDMM(float, f32)
DEF_SDDMM(double, f64)

/* Reduce rows src[ptr[i] : ptr[i+1], :] into out[i, :]. mode 0 sum, 1 mean, 2 max (arg gets the
 * winning row, the first one on ties; an empty segment gives 0 and arg -1), as torch_scatter does. */
#define DEF_SEGMENT(T, SFX)                                                                           \
int rg_segment_reduce_##SFX(const T *src, const int32_t *ptr, T *out, int32_t *arg, int64_t n_seg,    \
                            int64_t n_src, int64_t f, int mode) {                                     \
    int rc = check_ptr(ptr, n_seg, n_src);                                                            \
    if (rc) return rc;                                                                                \
    _Pragma("omp parallel for schedule(dynamic, 32) if (n_src * f > RG_GRAIN)")                       \
    for (int64_t i = 0; i < n_seg; i++) {                                                             \
        T *o = out + i * f;                                                                           \
        int32_t *a = arg ? arg + i * f : 0;                                                           \
        int64_t lo = ptr[i], hi = ptr[i + 1];                                                         \
        if (mode == 2) {                                                                              \
            for (int64_t j = 0; j < f; j++) {                                                         \
                if (lo == hi) { o[j] = 0; if (a) a[j] = -1; continue; }                               \
                T best = src[lo * f + j]; int64_t at = lo;                                            \
                for (int64_t k = lo + 1; k < hi; k++) {                                               \
                    T v = src[k * f + j];                                                             \
                    if (v > best || (v != v && best == best)) { best = v; at = k; }                   \
                }                                                                                     \
                o[j] = best;                                                                          \
                if (a) a[j] = (int32_t)at;                                                            \
            }                                                                                         \
            continue;                                                                                 \
        }                                                                                             \
        for (int64_t j = 0; j < f; j++) o[j] = 0;                                                     \
        for (int64_t k = lo; k < hi; k++)                                                             \
            for (int64_t j = 0; j < f; j++) o[j] += src[k * f + j];                                   \
        if (mode == 1 && hi > lo)                                                                     \
            for (int64_t j = 0; j < f; j++) o[j] /= (T)(hi - lo);                                     \
    }                                                                                                 \
    return RG_OK;                                                                                     \
}
DEF_SEGMENT(float, f32)
DEF_SEGMENT(double, f64)

/* out[k, :] = src[i, :] for every k in segment i (the adjoint of segment sum); dtype-agnostic. */
int rg_segment_expand(const char *src, const int32_t *ptr, char *out, int64_t n_seg, int64_t n_out,
                      int64_t row_bytes) {
    int rc = check_ptr(ptr, n_seg, n_out);
    if (rc) return rc;
    #pragma omp parallel for schedule(dynamic, 64) if (n_out * row_bytes > 4 * RG_GRAIN)
    for (int64_t i = 0; i < n_seg; i++)
        for (int64_t k = ptr[i]; k < ptr[i + 1]; k++)
            memcpy(out + k * row_bytes, src + i * row_bytes, (size_t)row_bytes);
    return RG_OK;
}

/* Softmax of x[ptr[i] : ptr[i+1], j] within each segment i, per column j (max-subtracted). */
#define DEF_SOFTMAX(T, SFX, EXP)                                                                      \
int rg_edge_softmax_##SFX(const T *x, const int32_t *ptr, T *out, int64_t n_seg, int64_t n_x, int64_t f) { \
    int rc = check_ptr(ptr, n_seg, n_x);                                                              \
    if (rc) return rc;                                                                                \
    _Pragma("omp parallel for schedule(dynamic, 32) if (n_x * f > RG_GRAIN / 8)")                     \
    for (int64_t i = 0; i < n_seg; i++) {                                                             \
        int64_t lo = ptr[i], hi = ptr[i + 1];                                                         \
        for (int64_t j = 0; j < f; j++) {                                                             \
            T m = -INFINITY, s = 0;                                                                   \
            for (int64_t k = lo; k < hi; k++) if (x[k * f + j] > m) m = x[k * f + j];                 \
            if (m == -INFINITY) m = 0; /* all -inf: exp gives 0/0 = NaN, as torch does */             \
            for (int64_t k = lo; k < hi; k++) { T e = EXP(x[k * f + j] - m); out[k * f + j] = e; s += e; } \
            for (int64_t k = lo; k < hi; k++) out[k * f + j] /= s;                                    \
        }                                                                                             \
    }                                                                                                 \
    return RG_OK;                                                                                     \
}
DEF_SOFTMAX(float, f32, expf)
DEF_SOFTMAX(double, f64, exp)

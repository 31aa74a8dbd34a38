/* Quantized weights (SPEC C: q8 blocks, SPEC D: int4 groups): packing, unpacking and matmuls that
   dequantise in registers — the weight is never expanded to a float copy.

   The matmuls pick their inner loop once at run time: AVX-512 VNNI (csrc/quant_vnni.c) when the CPU
   has it, else AVX2+FMA+F16C, else portable C. rumus_quant_set_isa forces a lower one (tests run every
   path the machine has; RUMUS_QUANT_ISA does the same through the Python kernels). Quantization
   itself is portable C whose float arithmetic follows rumus_contracts/ops/quant.py operation by
   operation (-std=c11 keeps the compiler from contracting a*b+c), so the words are byte-identical to
   the reference. */
#include "internal/rumus.h"
#include "internal/quant_vnni.h"
#include "gemm_blocked.h"
#include "quant.h"

#include <stdlib.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RUMUS_X86 1
#endif

enum { ISA_PORTABLE = 0, ISA_AVX2 = 1, ISA_AVX512_VNNI = 2 };
static int g_isa = -1;

static int best_isa(void) {
#if defined(RUMUS_X86) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return ISA_PORTABLE;
    if (rumus_quant_vnni_compiled() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return ISA_AVX512_VNNI;
    return ISA_AVX2;
#else
    return ISA_PORTABLE;
#endif
}

int rumus_quant_isa(void) {
    if (g_isa < 0) g_isa = best_isa();
    return g_isa;
}

int rumus_quant_best_isa(void) { return best_isa(); }

void rumus_quant_set_isa(int isa) {
    const int best = best_isa();
    g_isa = isa < 0 ? best : (isa < best ? isa : best);  /* never claim more than the CPU has */
}

/* ---- f16 <-> f32, round to nearest even (bit tricks after M. Dukhan's FP16 library) -------------- */
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float f32_from(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint16_t f16_from_f32(float f) {
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = f32_bits(f), shl1 = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1 & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = f32_from((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    return (uint16_t)((sign >> 16) | (shl1 > 0xFF000000u ? 0x7E00u : nonsign));
}

static float f32_from_f16(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
    const float normalized = f32_from((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = f32_from((two_w >> 17) | (126u << 23)) - 0.5f;
    return f32_from(sign | (two_w < (1u << 27) ? f32_bits(denormalized) : f32_bits(normalized)));
}

/* ---- q8 ------------------------------------------------------------------------------------------ */
void rumus_q8_quantize(uint32_t *words, const float *w, int64_t k, int64_t n, int64_t bs) {
    const int64_t nb = (k + bs - 1) / bs, bw = 1 + bs / 4;
    for (int64_t c = 0; c < n; c++) {
        for (int64_t b = 0; b < nb; b++) {
            uint32_t *blk = words + (c * nb + b) * bw;
            const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
            float absmax = 0.0f;
            for (int64_t j = 0; j < len; j++) {
                const float a = fabsf(w[(k0 + j) * n + c]);
                if (a > absmax) absmax = a;
            }
            blk[0] = f16_from_f32(absmax > 0.0f ? absmax / 127.0f : 1.0f);
            int8_t *q = (int8_t *)(blk + 1);  /* little-endian: byte j of word w is element 4w + j */
            memset(q, 0, (size_t)bs);
            if (absmax > 0.0f) {
                for (int64_t j = 0; j < len; j++) {
                    double v = nearbyint((double)w[(k0 + j) * n + c] * 127.0 / (double)absmax);
                    q[j] = (int8_t)(v > 127.0 ? 127 : (v < -128.0 ? -128 : v));
                }
            }
        }
    }
}

void rumus_q8_dequantize(float *out, const uint32_t *words, int64_t k, int64_t n, int64_t bs) {
    const int64_t nb = (k + bs - 1) / bs, bw = 1 + bs / 4;
    for (int64_t c = 0; c < n; c++) {
        for (int64_t b = 0; b < nb; b++) {
            const uint32_t *blk = words + (c * nb + b) * bw;
            const float s = f32_from_f16((uint16_t)(blk[0] & 0xFFFFu));
            const int8_t *q = (const int8_t *)(blk + 1);
            const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
            for (int64_t j = 0; j < len; j++) out[(k0 + j) * n + c] = (float)q[j] * s;
        }
    }
}

/* one column of q8 blocks against one row of x: sum_b scale_b * sum_j x_j q_j */
static float q8_column_portable(const float *x, const uint32_t *col, int64_t k, int64_t bs) {
    const int64_t nb = (k + bs - 1) / bs, bw = 1 + bs / 4;
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t *blk = col + b * bw;
        const int8_t *q = (const int8_t *)(blk + 1);
        const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
        float part = 0.0f;
        for (int64_t j = 0; j < len; j++) part += x[k0 + j] * (float)q[j];
        acc += part * f32_from_f16((uint16_t)(blk[0] & 0xFFFFu));
    }
    return acc;
}

#ifdef RUMUS_X86
__attribute__((target("avx2,fma,f16c")))
static float q8_column_avx2(const float *x, const uint32_t *col, int64_t k, int64_t bs) {
    const int64_t nb = (k + bs - 1) / bs, bw = 1 + bs / 4;
    __m256 acc = _mm256_setzero_ps();
    float tail = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t *blk = col + b * bw;
        const int8_t *q = (const int8_t *)(blk + 1);
        const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
        const float s = _cvtsh_ss((unsigned short)(blk[0] & 0xFFFFu));
        __m256 part = _mm256_setzero_ps(), part2 = part;  /* two chains hide the FMA latency */
        int64_t j = 0;
        for (; j + 16 <= len; j += 16) {  /* 16 int8 -> two vectors of 8 floats, in registers */
            __m128i raw = _mm_loadu_si128((const __m128i *)(q + j));
            __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
            __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(raw, 8)));
            part = _mm256_fmadd_ps(_mm256_loadu_ps(x + k0 + j), lo, part);
            part2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k0 + j + 8), hi, part2);
        }
        part = _mm256_add_ps(part, part2);
        float rest = 0.0f;
        for (; j < len; j++) rest += x[k0 + j] * (float)q[j];
        acc = _mm256_fmadd_ps(_mm256_set1_ps(s), part, acc);
        tail += rest * s;
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h) + tail;
}
#endif

/* ---- batches: float GEMM on dequantised column panels --------------------------------------------
   From PANEL_MIN_M rows on, the register loops lose to a float GEMM (they redo a dot product per row and
   column). Then PANEL_N columns at a time are dequantised into a [K, PANEL_N] float panel (a few MiB,
   never a copy of the whole weight) and multiplied by csrc/gemm_blocked.c's float32 GEMM, which is
   bit-identical at every thread count. Without an attached BLAS the register loops run. */
#define PANEL_N 256
static int64_t g_panel_min_m = 16;

void rumus_quant_set_panel_rows(int64_t min_m) { g_panel_min_m = min_m; }

typedef void (*panel_fill)(float *p, const void *w, int64_t k, int64_t n, int64_t size, int64_t j0, int64_t nn,
                           const float *scales, const float *zeros);

/* A panel fill on the pool (csrc/pool.c): the fill's arguments. */
typedef struct {
    float *p;
    const void *w;
    int64_t k, n, size, j0, nn;
    const float *scales, *zeros;
} fill_job;

/* q8 columns are contiguous, so their panel is stored transposed ([nn, K], one column per row: every
   write is sequential) and the GEMM reads it as B^T */
static void q8_fill_range(void *job, int64_t begin, int64_t end) {
    const fill_job *f = (const fill_job *)job;
    float *p = f->p;
    const void *w = f->w;
    const int64_t k = f->k, bs = f->size, j0 = f->j0;
    const int64_t nb = (k + bs - 1) / bs, bw = 1 + bs / 4;
    for (int64_t cc = begin; cc < end; cc++) {
        const uint32_t *col = (const uint32_t *)w + (j0 + cc) * nb * bw;
        float *dst = p + cc * k;
        for (int64_t b = 0; b < nb; b++) {
            const float s = f32_from_f16((uint16_t)(col[b * bw] & 0xFFFFu));
            const int8_t *q = (const int8_t *)(col + b * bw + 1);
            const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
            for (int64_t j = 0; j < len; j++) dst[k0 + j] = (float)q[j] * s;
        }
    }
}

static void q8_fill(float *p, const void *w, int64_t k, int64_t n, int64_t bs, int64_t j0, int64_t nn,
                    const float *scales, const float *zeros) {
    fill_job f = {p, w, k, n, bs, j0, nn, scales, zeros};
    rumus_parallel_for(rumus_threads_for_units(nn, nn * k), nn, q8_fill_range, &f);
}

static void int4_fill_range(void *job, int64_t begin, int64_t end) {
    const fill_job *f = (const fill_job *)job;
    float *p = f->p;
    const float *scales = f->scales, *zeros = f->zeros;
    const int64_t n = f->n, g = f->size, j0 = f->j0, nn = f->nn;
    for (int64_t r = begin; r < end; r++) {
        const float *s = scales + (r / g) * n + j0, *z = zeros + (r / g) * n + j0;
        const uint32_t *row = (const uint32_t *)f->w + (r / 8) * n + j0;
        const int shift = (int)(4 * (r % 8));
        for (int64_t c = 0; c < nn; c++) p[r * nn + c] = ((float)((row[c] >> shift) & 0xFu) - z[c]) * s[c];
    }
}

static void int4_fill(float *p, const void *w, int64_t k, int64_t n, int64_t g, int64_t j0, int64_t nn,
                      const float *scales, const float *zeros) {
    fill_job f = {p, w, k, n, g, j0, nn, scales, zeros};
    rumus_parallel_for(rumus_threads_for_units(k, nn * k), k, int4_fill_range, &f);
}

/* 1 when out was computed here, 0 when the caller's register loops must run */
static int linear_panels(float *out, const float *x, const void *w, const float *scales, const float *zeros,
                         int64_t m, int64_t k, int64_t n, int64_t size, panel_fill fill, int transposed) {
    if (m < g_panel_min_m || k <= 0 || !rumus_gemm_attached()) return 0;
    const int64_t width = n < PANEL_N ? n : PANEL_N;
    float *p = (float *)malloc((size_t)(k * width) * sizeof(float));
    int ok = p != NULL;
    for (int64_t j0 = 0; ok && j0 < n; j0 += PANEL_N) {
        const int64_t nn = (n - j0 < PANEL_N) ? n - j0 : PANEL_N;
        fill(p, w, k, n, size, j0, nn, scales, zeros);
        ok = rumus_gemm(0, 1, 1, m, nn, k, x, 0, 0, k, 0, p, 0, 0, transposed ? k : nn, transposed, out + j0, 0, 0,
                        n);
    }
    free(p);
    return ok;
}

/* the register loops of one q8 matmul on the pool (csrc/pool.c): columns [begin, end) of every row */
typedef struct {
    float *out;
    const float *x;
    const uint32_t *words;
    int64_t m, k, n, bs, col_words;
    int isa;
} q8_linear_job;

static void q8_linear_range(void *job, int64_t begin, int64_t end) {
    const q8_linear_job *j = (const q8_linear_job *)job;
    float *out = j->out;
    const float *x = j->x;
    const int64_t m = j->m, k = j->k, n = j->n, bs = j->bs;
    const int isa = j->isa;
    RUMUS_UNUSED(isa);
    for (int64_t c = begin; c < end; c++) {
        const uint32_t *col = j->words + c * j->col_words;  /* a column's blocks are contiguous: it stays in L1 */
        for (int64_t r = 0; r < m; r++) {
#ifdef RUMUS_X86
            if (isa >= ISA_AVX2) { out[r * n + c] = q8_column_avx2(x + r * k, col, k, bs); continue; }
#endif
            out[r * n + c] = q8_column_portable(x + r * k, col, k, bs);
        }
    }
}

void rumus_q8_linear(float *out, const float *x, const uint32_t *words, int64_t m, int64_t k, int64_t n,
                     int64_t bs) {
    const int64_t col_words = ((k + bs - 1) / bs) * (1 + bs / 4);
    const int isa = rumus_quant_isa();
    if (linear_panels(out, x, words, NULL, NULL, m, k, n, bs, q8_fill, 1)) return;
    /* VNNI needs x in integer form; it declines (-1) a NaN / inf / subnormal-only block or a failed
       allocation, and then the float AVX2 loop below computes the IEEE result */
    if (isa == ISA_AVX512_VNNI && rumus_q8_linear_vnni(out, x, words, m, k, n, bs) == 0) return;
    const int threads = rumus_threads_for(n * (k > 0 ? k : 1) * (m > 0 ? m : 1));
    q8_linear_job job = {out, x, words, m, k, n, bs, col_words, isa};
    rumus_parallel_for(threads, n, q8_linear_range, &job);
}

#define INT4_CHUNK 512

/* ---- int4 ---------------------------------------------------------------------------------------- */
void rumus_int4_quantize(uint32_t *words, float *scales, float *zeros, const float *w, int64_t k, int64_t n,
                         int64_t g) {
    const int64_t groups = (k + g - 1) / g, padded = groups * g;
    memset(words, 0, (size_t)(padded / 8 * n) * sizeof(uint32_t));
    for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t k0 = gi * g, k1 = (k0 + g < k) ? k0 + g : k;
        for (int64_t c = 0; c < n; c++) {
            float lo = w[k0 * n + c], hi = lo;
            for (int64_t r = k0 + 1; r < k1; r++) {
                const float v = w[r * n + c];
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            const float range = hi - lo;
            const float s = range <= 1e-10f ? 1.0f : range / 15.0f;
            float zp = rintf(-lo / s);
            zp = (zp < 0.0f ? 0.0f : (zp > 15.0f ? 15.0f : zp)) + 0.0f;  /* + 0: never -0.0 */
            scales[gi * n + c] = s;
            zeros[gi * n + c] = zp;
            for (int64_t r = k0; r < k1; r++) {
                float q = rintf(w[r * n + c] / s + zp);
                q = q < 0.0f ? 0.0f : (q > 15.0f ? 15.0f : q);
                words[(r / 8) * n + c] |= (uint32_t)q << (4 * (r % 8));
            }
        }
    }
}

void rumus_int4_dequantize(float *out, const uint32_t *words, const float *scales, const float *zeros, int64_t k,
                           int64_t n, int64_t g) {
    for (int64_t r = 0; r < k; r++) {
        const float *s = scales + (r / g) * n, *z = zeros + (r / g) * n;
        const uint32_t *row = words + (r / 8) * n;
        const int shift = (int)(4 * (r % 8));
        for (int64_t c = 0; c < n; c++) out[r * n + c] = ((float)((row[c] >> shift) & 0xFu) - z[c]) * s[c];
    }
}

/* out[c] for columns [c0, c1) of one row: sum_g scale (sum_k x_k q_kc - zp sum_k x_k), over a zero-padded
   x (padding codes are 0 and padding x is 0, so whole groups run without bounds checks) */
static void int4_row_portable(float *out, const float *xp, const float *xsum, const uint32_t *words,
                              const float *scales, const float *zeros, int64_t groups, int64_t n, int64_t g,
                              int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
        float acc = 0.0f;
        for (int64_t gi = 0; gi < groups; gi++) {
            float dot = 0.0f;
            for (int64_t wr = gi * g / 8; wr < (gi + 1) * g / 8; wr++) {
                const uint32_t wv = words[wr * n + c];
                const float *xk = xp + wr * 8;
                for (int j = 0; j < 8; j++) dot += xk[j] * (float)((wv >> (4 * j)) & 0xFu);
            }
            acc += scales[gi * n + c] * (dot - zeros[gi * n + c] * xsum[gi]);
        }
        out[c] = acc;
    }
}

#ifdef RUMUS_X86
/* Columns [c0, c1) (at most INT4_CHUNK, a multiple of 8 wide except at the end) of one row. Rows of
   the weight are walked in order and columns inside a row, so the words stream from memory in
   address order (walking one column down K would stride N words per step and defeat the prefetcher);
   the per-column sums live in two small arrays that stay in L1. */
__attribute__((target("avx2,fma")))
static void int4_row_avx2(float *out, const float *xp, const float *xsum, const uint32_t *words,
                          const float *scales, const float *zeros, int64_t groups, int64_t n, int64_t g,
                          int64_t c0, int64_t c1) {
    const __m256i mask = _mm256_set1_epi32(0xF);
    const int64_t vec_end = c0 + ((c1 - c0) / 8) * 8;
    float acc[INT4_CHUNK], dsum[INT4_CHUNK];
    for (int64_t c = c0; c < vec_end; c++) acc[c - c0] = 0.0f;
    for (int64_t gi = 0; gi < groups; gi++) {
        for (int64_t c = c0; c < vec_end; c++) dsum[c - c0] = 0.0f;
        for (int64_t wr = gi * g / 8; wr < (gi + 1) * g / 8; wr++) {
            const float *xk = xp + wr * 8;
            const __m256 x0 = _mm256_set1_ps(xk[0]), x1 = _mm256_set1_ps(xk[1]), x2 = _mm256_set1_ps(xk[2]),
                         x3 = _mm256_set1_ps(xk[3]), x4 = _mm256_set1_ps(xk[4]), x5 = _mm256_set1_ps(xk[5]),
                         x6 = _mm256_set1_ps(xk[6]), x7 = _mm256_set1_ps(xk[7]);
            const uint32_t *row = words + wr * n;
            for (int64_t c = c0; c < vec_end; c += 8) {
                const __m256i wv = _mm256_loadu_si256((const __m256i *)(row + c));
#define NIB(j) _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(wv, 4 * (j)), mask))
                __m256 a = _mm256_mul_ps(x0, NIB(0));
                __m256 b = _mm256_mul_ps(x1, NIB(1));
                a = _mm256_fmadd_ps(x2, NIB(2), a);
                b = _mm256_fmadd_ps(x3, NIB(3), b);
                a = _mm256_fmadd_ps(x4, NIB(4), a);
                b = _mm256_fmadd_ps(x5, NIB(5), b);
                a = _mm256_fmadd_ps(x6, NIB(6), a);
                b = _mm256_fmadd_ps(x7, NIB(7), b);
#undef NIB
                float *d = dsum + (c - c0);
                _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(d), _mm256_add_ps(a, b)));
            }
        }
        const __m256 xs = _mm256_set1_ps(xsum[gi]);
        for (int64_t c = c0; c < vec_end; c += 8) {
            const __m256 s = _mm256_loadu_ps(scales + gi * n + c), z = _mm256_loadu_ps(zeros + gi * n + c);
            float *a = acc + (c - c0);
            _mm256_storeu_ps(a, _mm256_fmadd_ps(s, _mm256_fnmadd_ps(z, xs, _mm256_loadu_ps(dsum + (c - c0))),
                                                _mm256_loadu_ps(a)));
        }
    }
    for (int64_t c = c0; c < vec_end; c++) out[c] = acc[c - c0];
    int4_row_portable(out, xp, xsum, words, scales, zeros, groups, n, g, vec_end, c1);
}
#endif

/* the register loops of one int4 matmul on the pool (csrc/pool.c): column slabs [begin, end) of every row */
typedef struct {
    float *out;
    const float *xp, *xs;
    const uint32_t *words;
    const float *scales, *zeros;
    int64_t m, n, g, groups, padded;
    int isa;
} int4_linear_job;

static void int4_linear_range(void *job, int64_t begin, int64_t end) {
    const int4_linear_job *j = (const int4_linear_job *)job;
    float *out = j->out;
    const float *xp = j->xp, *xs = j->xs, *scales = j->scales, *zeros = j->zeros;
    const uint32_t *words = j->words;
    const int64_t m = j->m, n = j->n, g = j->g, groups = j->groups, padded = j->padded;
    const int64_t chunk = INT4_CHUNK;
    const int isa = j->isa;
    RUMUS_UNUSED(isa);
    for (int64_t ci = begin; ci < end; ci++) {
        const int64_t c0 = ci * chunk, c1 = (c0 + chunk < n) ? c0 + chunk : n;
        for (int64_t r = 0; r < m; r++) {
#ifdef RUMUS_X86
            if (isa >= ISA_AVX2) {
                int4_row_avx2(out + r * n, xp + r * padded, xs + r * groups, words, scales, zeros, groups, n, g,
                              c0, c1);
                continue;
            }
#endif
            int4_row_portable(out + r * n, xp + r * padded, xs + r * groups, words, scales, zeros, groups, n, g,
                              c0, c1);
        }
    }
}

void rumus_int4_linear(float *out, const float *x, const uint32_t *words, const float *scales, const float *zeros,
                       int64_t m, int64_t k, int64_t n, int64_t g) {
    if (m <= 0 || n <= 0) return;
    const int64_t groups = (k + g - 1) / g, padded = groups * g;
    const int isa = rumus_quant_isa();
    if (linear_panels(out, x, words, scales, zeros, m, k, n, g, int4_fill, 0)) return;
    if (isa == ISA_AVX512_VNNI && rumus_int4_linear_vnni(out, x, words, scales, zeros, m, k, n, g) == 0) return;
    RUMUS_UNUSED(isa);
    /* a zero-padded copy of x and its per-group sums: K floats per row, never a copy of the weight */
    float *xp = (float *)calloc((size_t)(m * padded + m * groups + 1), sizeof(float));
    if (!xp) return;
    float *xs = xp + m * padded;
    for (int64_t r = 0; r < m; r++) {
        memcpy(xp + r * padded, x + r * k, (size_t)k * sizeof(float));
        for (int64_t gi = 0; gi < groups; gi++) {
            float s = 0.0f;
            for (int64_t j = gi * g; j < (gi + 1) * g; j++) s += xp[r * padded + j];
            xs[r * groups + gi] = s;
        }
    }
    const int64_t chunk = INT4_CHUNK;  /* a slab of columns: one thread's share, reused by every row */
    const int64_t nchunks = (n + chunk - 1) / chunk;
    const int threads = rumus_threads_for(n * (k > 0 ? k : 1) * m);
    int4_linear_job job = {out, xp, xs, words, scales, zeros, m, n, g, groups, padded, isa};
    rumus_parallel_for(threads, nchunks, int4_linear_range, &job);
    free(xp);
}

/* AVX-512 VNNI quantized matmuls (q8 blocks, SPEC C; int4 groups, SPEC D), dequantising in registers.

   vpdpbusd multiplies unsigned by signed bytes and sums four products into an int32 lane. The weights
   already are bytes; the float32 activations are turned into integers per block (per q8 block / int4
   group of one row): X = rint(x / sx) with sx = absmax / 8355711, written as three balanced base-256
   digits d0 + 256 d1 + 65536 d2 (each in [-127, 127]). Each digit plane's dot product with the weight
   bytes is exact in int32, and X carries 24 bits per element, so the result differs from a float32 FMA
   loop only by the rounding of x to 2^-24 of its block's absmax — unlike llama.cpp's Q8_0 x Q8_0
   (one 8-bit digit), which would miss this repository's float64-reference bounds by orders of
   magnitude. The three planes cost three vpdpbusd per 64 weight bytes instead of one.

   q8: weights are signed, so the digits go in as the unsigned operand, d + 128, and 128 * sum(q) (one
   more vpdpbusd against ones) is taken back out per lane, exactly. int4: the codes are unsigned and the
   digits signed, as vpdpbusd wants; the zero point comes out through sum(X) per group, as in quant.c.

   Built with per-function target attributes, so this file compiles (to stubs) on compilers or CPUs
   without AVX-512; quant.c calls in only when cpuid reports VNNI. */
#include "internal/rumus.h"
#include "internal/quant_vnni.h"

#include <stdlib.h>

#define INT4_CHUNK 512

#if (defined(__x86_64__) || defined(_M_X64)) && ((defined(__GNUC__) && __GNUC__ >= 8) || defined(__clang__))
#define RUMUS_VNNI 1
#include <immintrin.h>
#endif

/* ---- activations -> three digit planes (portable C) ---------------------------------------------- */
#define X_MAX 8355711.0  /* 127 * (1 + 256 + 65536): the largest |X| three digits in [-127, 127] hold */

/* x[0, len) -> digits d[0][j], d[1][j], d[2][j] for j < width (zero beyond len); returns sx and
   writes sum(X). Returns -1 for a NaN or inf (which has no integer form). */
static int split_block(int8_t *d0, int8_t *d1, int8_t *d2, const float *x, int64_t len, int64_t width,
                       float *sx_out, float *sum_out) {
    float absmax = 0.0f;
    for (int64_t j = 0; j < len; j++) {
        const float a = fabsf(x[j]);
        if (!(a <= 3.4e38f)) return -1;
        if (a > absmax) absmax = a;
    }
    memset(d0, 0, (size_t)width);
    memset(d1, 0, (size_t)width);
    memset(d2, 0, (size_t)width);
    *sx_out = 0.0f;
    *sum_out = 0.0f;
    if (absmax == 0.0f) return 0;
    const float sx = (float)((double)absmax / X_MAX);
    if (sx == 0.0f) return -1;  /* subnormal block: let the float path handle it */
    int64_t sum = 0;
    for (int64_t j = 0; j < len; j++) {
        double v = nearbyint((double)x[j] / (double)sx);
        v = v > X_MAX ? X_MAX : (v < -X_MAX ? -X_MAX : v);
        const int32_t big = (int32_t)v;
        const int32_t lo = ((big + 128) & 255) - 128, rest = (big - lo) / 256;
        const int32_t mid = ((rest + 128) & 255) - 128;
        d0[j] = (int8_t)lo;
        d1[j] = (int8_t)mid;
        d2[j] = (int8_t)((rest - mid) / 256);
        sum += big;
    }
    *sx_out = sx;
    *sum_out = (float)sum;
    return 0;
}

#ifdef RUMUS_VNNI
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

int rumus_quant_vnni_compiled(void) { return 1; }

/* d0 + 256 d1 + 65536 d2 per lane: each plane's lane sum is an exact int32 below 2^24, so it converts
   exactly; the two adds round once each, like the FMA chain of the float path. */
VNNI_TARGET static inline __m512 combine(__m512i a0, __m512i a1, __m512i a2) {
    const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), _mm512_set1_ps(256.0f), _mm512_cvtepi32_ps(a0));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(a2), _mm512_set1_ps(65536.0f), t);
}

/* One q8 column (nb contiguous blocks) against one row's digit planes (stored as d + 128, kp apart). */
VNNI_TARGET static float q8_column_vnni(const uint8_t *xu, int64_t kp, const float *sx, const uint32_t *col,
                                        int64_t nb, int64_t bs) {
    const int64_t bw = 1 + bs / 4, step = bs >= 64 ? 64 : bs;
    const __mmask64 m = bs >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << bs) - 1);  /* 16 / 32-byte blocks */
    const __m512i ones = _mm512_set1_epi8(1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t *blk = col + b * bw;
        const int8_t *q = (const int8_t *)(blk + 1);
        const uint8_t *x0 = xu + b * bs;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, qs = a0;
        for (int64_t j = 0; j < bs; j += step) {
            const __m512i w = _mm512_maskz_loadu_epi8(m, q + j);
            qs = _mm512_dpbusd_epi32(qs, ones, w);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, x0 + j), w);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_maskz_loadu_epi8(m, x0 + kp + j), w);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_maskz_loadu_epi8(m, x0 + 2 * kp + j), w);
        }
        const __m512i c = _mm512_slli_epi32(qs, 7);  /* the +128 of the unsigned digits, taken back out */
        const __m512 t = combine(_mm512_sub_epi32(a0, c), _mm512_sub_epi32(a1, c), _mm512_sub_epi32(a2, c));
        const float s = _cvtsh_ss((unsigned short)(blk[0] & 0xFFFFu)) * sx[b];
        acc = _mm512_fmadd_ps(t, _mm512_set1_ps(s), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* one q8 matmul's columns on the pool (csrc/pool.c): columns [begin, end) of every row */
typedef struct {
    float *out;
    const uint8_t *xu;
    const float *sx;
    const uint32_t *words;
    int64_t m, n, bs, nb, kp, col_words;
} q8_vnni_job;

static void q8_vnni_range(void *job, int64_t begin, int64_t end) {
    const q8_vnni_job *j = (const q8_vnni_job *)job;
    const int64_t m = j->m, n = j->n, bs = j->bs, nb = j->nb, kp = j->kp;
    for (int64_t c = begin; c < end; c++) {
        const uint32_t *col = j->words + c * j->col_words;  /* a column's blocks are contiguous: it stays in L1 */
        for (int64_t r = 0; r < m; r++)
            j->out[r * n + c] = q8_column_vnni(j->xu + r * 3 * kp, kp, j->sx + r * nb, col, nb, bs);
    }
}

int rumus_q8_linear_vnni(float *out, const float *x, const uint32_t *words, int64_t m, int64_t k, int64_t n,
                         int64_t bs) {
    const int64_t nb = (k + bs - 1) / bs, kp = nb * bs, col_words = nb * (1 + bs / 4);
    uint8_t *xu = (uint8_t *)malloc((size_t)(m * 3 * kp + 1));
    float *sx = (float *)malloc((size_t)(m * nb + 1) * sizeof(float));
    int rc = (xu && sx) ? 0 : -1;
    for (int64_t r = 0; r < m && rc == 0; r++) {
        uint8_t *plane = xu + r * 3 * kp;
        for (int64_t b = 0; b < nb && rc == 0; b++) {
            float sum;
            const int64_t k0 = b * bs, len = (k - k0 < bs) ? k - k0 : bs;
            rc = split_block((int8_t *)plane + k0, (int8_t *)plane + kp + k0, (int8_t *)plane + 2 * kp + k0,
                             x + r * k + k0, len, bs, sx + r * nb + b, &sum);
        }
        for (int64_t j = 0; j < 3 * kp; j++) plane[j] ^= 0x80u;  /* d -> d + 128: vpdpbusd's unsigned side */
    }
    if (rc == 0) {
        const int threads = rumus_threads_for(n * (k > 0 ? k : 1) * (m > 0 ? m : 1));
        q8_vnni_job job = {out, xu, sx, words, m, n, bs, nb, kp, col_words};
        rumus_parallel_for(threads, n, q8_vnni_range, &job);
    }
    free(xu);
    free(sx);
    return rc;
}

/* Columns [c0, c1) (at most INT4_CHUNK) of one row, walking the weight's rows in address order like
   quant.c's AVX2 kernel. A word holds 8 nibbles of one column; its even nibbles (k0, k2, k4, k6) masked
   to bytes meet the packed even digits of x, the odd ones the odd digits. */
VNNI_TARGET static void int4_row_vnni(float *out, const int32_t *xw, const float *sxg, const float *sumg,
                                      const uint32_t *words, const float *scales, const float *zeros,
                                      int64_t groups, int64_t n, int64_t g, int64_t c0, int64_t c1) {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const int64_t width = c1 - c0, vecs = (width + 15) / 16;
    const __mmask16 last = (width % 16) ? (__mmask16)((1u << (width % 16)) - 1u) : (__mmask16)0xFFFF;
    __m512 acc[INT4_CHUNK / 16];
    int32_t dig[3][INT4_CHUNK] __attribute__((aligned(64)));
    for (int64_t v = 0; v < vecs; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < groups; gi++) {
        for (int p = 0; p < 3; p++) memset(dig[p], 0, (size_t)(vecs * 16) * sizeof(int32_t));
        for (int64_t wr = gi * g / 8; wr < (gi + 1) * g / 8; wr++) {
            const int32_t *xv = xw + wr * 6;
            const __m512i e0 = _mm512_set1_epi32(xv[0]), o0 = _mm512_set1_epi32(xv[1]);
            const __m512i e1 = _mm512_set1_epi32(xv[2]), o1 = _mm512_set1_epi32(xv[3]);
            const __m512i e2 = _mm512_set1_epi32(xv[4]), o2 = _mm512_set1_epi32(xv[5]);
            const uint32_t *row = words + wr * n + c0;
            for (int64_t v = 0; v < vecs; v++) {
                const __m512i w = _mm512_maskz_loadu_epi32(v == vecs - 1 ? last : (__mmask16)0xFFFF, row + 16 * v);
                const __m512i lo = _mm512_and_si512(w, nib), hi = _mm512_and_si512(_mm512_srli_epi32(w, 4), nib);
                int32_t *p0 = dig[0] + 16 * v, *p1 = dig[1] + 16 * v, *p2 = dig[2] + 16 * v;
                _mm512_store_si512(p0, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_load_si512(p0), lo, e0), hi, o0));
                _mm512_store_si512(p1, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_load_si512(p1), lo, e1), hi, o1));
                _mm512_store_si512(p2, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_load_si512(p2), lo, e2), hi, o2));
            }
        }
        const __m512 sx = _mm512_set1_ps(sxg[gi]), xs = _mm512_set1_ps(sumg[gi]);
        for (int64_t v = 0; v < vecs; v++) {
            const __mmask16 mv = v == vecs - 1 ? last : (__mmask16)0xFFFF;
            const __m512 t = combine(_mm512_load_si512(dig[0] + 16 * v), _mm512_load_si512(dig[1] + 16 * v),
                                     _mm512_load_si512(dig[2] + 16 * v));
            const __m512 s = _mm512_maskz_loadu_ps(mv, scales + gi * n + c0 + 16 * v);
            const __m512 z = _mm512_maskz_loadu_ps(mv, zeros + gi * n + c0 + 16 * v);
            acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(s, sx), _mm512_fnmadd_ps(z, xs, t), acc[v]);
        }
    }
    for (int64_t v = 0; v < vecs; v++)
        _mm512_mask_storeu_ps(out + c0 + 16 * v, v == vecs - 1 ? last : (__mmask16)0xFFFF, acc[v]);
}

static uint32_t pack4(const int8_t *d, int first) {  /* bytes d[first], d[first + 2], d[first + 4], d[first + 6] */
    return (uint32_t)(uint8_t)d[first] | (uint32_t)(uint8_t)d[first + 2] << 8 |
           (uint32_t)(uint8_t)d[first + 4] << 16 | (uint32_t)(uint8_t)d[first + 6] << 24;
}

/* one int4 matmul's column slabs on the pool (csrc/pool.c): slabs [begin, end) of every row */
typedef struct {
    float *out;
    const int32_t *xw;
    const float *sxg, *sumg;
    const uint32_t *words;
    const float *scales, *zeros;
    int64_t m, n, g, groups, wrows;
} int4_vnni_job;

static void int4_vnni_range(void *job, int64_t begin, int64_t end) {
    const int4_vnni_job *j = (const int4_vnni_job *)job;
    const int64_t m = j->m, n = j->n, g = j->g, groups = j->groups, wrows = j->wrows;
    for (int64_t ci = begin; ci < end; ci++) {
        const int64_t c0 = ci * INT4_CHUNK, c1 = (c0 + INT4_CHUNK < n) ? c0 + INT4_CHUNK : n;
        for (int64_t r = 0; r < m; r++)
            int4_row_vnni(j->out + r * n, j->xw + r * wrows * 6, j->sxg + r * groups, j->sumg + r * groups, j->words,
                          j->scales, j->zeros, groups, n, g, c0, c1);
    }
}

int rumus_int4_linear_vnni(float *out, const float *x, const uint32_t *words, const float *scales,
                           const float *zeros, int64_t m, int64_t k, int64_t n, int64_t g) {
    const int64_t groups = (k + g - 1) / g, wrows = groups * g / 8;
    /* per row: 6 int32 per word row (even / odd digits of each plane), sx and sum(X) per group */
    int32_t *xw = (int32_t *)malloc((size_t)(m * wrows * 6 + 1) * sizeof(int32_t));
    float *sxg = (float *)malloc((size_t)(2 * m * groups + 1) * sizeof(float));
    int8_t *dig = (int8_t *)malloc((size_t)(3 * g));
    int rc = (xw && sxg && dig) ? 0 : -1;
    float *sumg = sxg ? sxg + m * groups : NULL;
    for (int64_t r = 0; r < m && rc == 0; r++) {
        for (int64_t gi = 0; gi < groups && rc == 0; gi++) {
            const int64_t k0 = gi * g, len = (k - k0 < g) ? k - k0 : g;
            rc = split_block(dig, dig + g, dig + 2 * g, x + r * k + k0, len, g, sxg + r * groups + gi,
                             sumg + r * groups + gi);
            for (int64_t w8 = 0; w8 < g / 8 && rc == 0; w8++) {
                int32_t *dst = xw + (r * wrows + gi * g / 8 + w8) * 6;
                for (int p = 0; p < 3; p++) {
                    dst[2 * p] = (int32_t)pack4(dig + p * g + 8 * w8, 0);
                    dst[2 * p + 1] = (int32_t)pack4(dig + p * g + 8 * w8, 1);
                }
            }
        }
    }
    if (rc == 0) {
        const int64_t nchunks = (n + INT4_CHUNK - 1) / INT4_CHUNK;
        const int threads = rumus_threads_for(n * (k > 0 ? k : 1) * m);
        int4_vnni_job job = {out, xw, sxg, sumg, words, scales, zeros, m, n, g, groups, wrows};
        rumus_parallel_for(threads, nchunks, int4_vnni_range, &job);
    }
    free(xw);
    free(sxg);
    free(dig);
    return rc;
}

#else
int rumus_quant_vnni_compiled(void) { return 0; }
int rumus_q8_linear_vnni(float *out, const float *x, const uint32_t *words, int64_t m, int64_t k, int64_t n,
                         int64_t bs) {
    RUMUS_UNUSED(out); RUMUS_UNUSED(x); RUMUS_UNUSED(words); RUMUS_UNUSED(m); RUMUS_UNUSED(k); RUMUS_UNUSED(n);
    RUMUS_UNUSED(bs); RUMUS_UNUSED(split_block);
    return -1;
}
int rumus_int4_linear_vnni(float *out, const float *x, const uint32_t *words, const float *scales,
                           const float *zeros, int64_t m, int64_t k, int64_t n, int64_t g) {
    RUMUS_UNUSED(out); RUMUS_UNUSED(x); RUMUS_UNUSED(words); RUMUS_UNUSED(scales); RUMUS_UNUSED(zeros);
    RUMUS_UNUSED(m); RUMUS_UNUSED(k); RUMUS_UNUSED(n); RUMUS_UNUSED(g);
    return -1;
}
#endif

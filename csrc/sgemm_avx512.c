/* The float32 GEMM's AVX-512 part (csrc/internal/sgemm.h has the layouts): a micro-kernel of MR rows x 32
   columns (two zmm per row, MR*2 accumulators in registers, one broadcast of op(A) per row and step), and
   op(B)'s packing (rows copied, or 16x16 register transposes when B is stored transposed).

   Compiled with per-function target attributes (no -march flag: the library must load on any x86-64);
   csrc/sgemm_kernel.c calls in only when cpuid reports AVX-512F. Edge tiles (fewer than MR rows, or at
   most 16 columns) have their own instantiations, so no multiply-add is spent on padding rows and at most
   15 lanes on padding columns; masked loads and stores never touch C outside its window. */
#include "internal/rumus.h"
#include "internal/sgemm.h"

#if (defined(__x86_64__) || defined(_M_X64)) && ((defined(__GNUC__) && __GNUC__ >= 8) || defined(__clang__))
#define RUMUS_SGEMM_AVX512 1
#include <immintrin.h>
#endif

#ifdef RUMUS_SGEMM_AVX512
#define TGT __attribute__((target("avx512f,fma")))
#define INL __attribute__((target("avx512f,fma"), always_inline)) static inline
#ifndef SGEMM512_MR
#define SGEMM512_MR 12 /* rows: 24 accumulators + 2 B vectors + a broadcast fit the 32 zmm (benchmarks/gemm_kernel.py) */
#endif
#define MR SGEMM512_MR
#define NR 32

/* lanes [0, w) of a 16-lane vector, w clamped to [0, 16] */
static inline __mmask16 mask_of(int64_t w) {
    return w >= 16 ? (__mmask16)0xFFFF : (w <= 0 ? (__mmask16)0 : (__mmask16)((1u << w) - 1u));
}

/* C tile [mr x nr] (nr <= 16*nv) = (load_c ? C : 0) + a @ b over kc; mr and nv are constants after inlining,
   so the accumulators live in registers. */
INL void tile(const int mr, const int nv, int64_t kc, const float *restrict a, const float *restrict b, float *c,
              int64_t ldc, int64_t nr, int load_c) {
    __m512 acc0[MR], acc1[MR];
    const __mmask16 k0 = mask_of(nr), k1 = mask_of(nr - 16);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
        acc0[i] = load_c ? _mm512_maskz_loadu_ps(k0, c + i * ldc) : _mm512_setzero_ps();
        if (nv > 1) acc1[i] = load_c ? _mm512_maskz_loadu_ps(k1, c + i * ldc + 16) : _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++) {
        const __m512 b0 = _mm512_load_ps(b + p * NR);
        const __m512 b1 = nv > 1 ? _mm512_load_ps(b + p * NR + 16) : b0;
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const __m512 ai = _mm512_set1_ps(a[p * MR + i]);
            acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
            if (nv > 1) acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, k0, acc0[i]);
        if (nv > 1) _mm512_mask_storeu_ps(c + i * ldc + 16, k1, acc1[i]);
    }
}

typedef void (*tile_fn)(int64_t, const float *, const float *, float *, int64_t, int64_t, int);

#define TILE_FN(R, V)                                                                                       \
    TGT static void tile_##R##_##V(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t nr, \
                                   int load_c) {                                                            \
        tile(R, V, kc, a, b, c, ldc, nr, load_c);                                                           \
    }
#define TILE_ROWS(R) TILE_FN(R, 1) TILE_FN(R, 2)
TILE_ROWS(1) TILE_ROWS(2) TILE_ROWS(3) TILE_ROWS(4) TILE_ROWS(5) TILE_ROWS(6) TILE_ROWS(7) TILE_ROWS(8)
#if MR > 8
TILE_ROWS(9) TILE_ROWS(10) TILE_ROWS(11) TILE_ROWS(12)
#endif
#if MR > 12
TILE_ROWS(13) TILE_ROWS(14)
#endif
#if MR > 14
#error "SGEMM512_MR: at most 14 rows (2 accumulators each) fit the zmm registers"
#endif

#define TILE_PAIR(R) {tile_##R##_1, tile_##R##_2}
static const tile_fn TILES[MR][2] = {
    TILE_PAIR(1), TILE_PAIR(2), TILE_PAIR(3), TILE_PAIR(4), TILE_PAIR(5), TILE_PAIR(6), TILE_PAIR(7), TILE_PAIR(8),
#if MR > 8
    TILE_PAIR(9), TILE_PAIR(10), TILE_PAIR(11), TILE_PAIR(12),
#endif
#if MR > 12
    TILE_PAIR(13), TILE_PAIR(14),
#endif
};

/* Panels of B outside, rows of A inside: one panel of B (kc x 32, up to 32 KiB at kc = 256) stays in L1
   while the block of A streams from L2. */
TGT static void block512(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                         int64_t ldc, int load_c) {
    for (int64_t j = 0; j < nc; j += NR) {
        const int64_t nr = nc - j < NR ? nc - j : NR;
        const float *b = Bp + j * kc;
        for (int64_t i = 0; i < mc; i += MR) {
            const int64_t mr = mc - i < MR ? mc - i : MR;
            TILES[mr - 1][nr > 16](kc, Ap + i * kc, b, C + i * ldc + j, ldc, nr, load_c);
        }
    }
}

/* rows[0..16) (each 16 floats, rows past the edge zero) -> their transpose, in place. */
INL void transpose16(__m512 *r) {
    __m512 t[16], u[16];
    for (int g = 0; g < 4; g++) {
        const __m512 lo01 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]), hi01 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        const __m512 lo23 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
        const __m512 hi23 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        /* u[4g + c], 128-bit lane l: column 4l + c of rows 4g..4g+3 */
        u[4 * g] = _mm512_shuffle_ps(lo01, lo23, 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(lo01, lo23, 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(hi01, hi23, 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(hi01, hi23, 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        t[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);       /* cols c, 8+c of rows 0..7 */
        t[4 + c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);   /* cols 4+c, 12+c of rows 0..7 */
        t[8 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);
    }
}

/* op(B) (kc x nc) -> panels of 32 columns. tb = 0: B's rows are op(B)'s rows (a copy, masked at the edge);
   tb = 1: B is stored [n][k], so 16 columns x 16 steps are loaded as rows and transposed in registers. */
TGT static void pack_b512(int tb, const float *B, int64_t ldb, int64_t kc, int64_t nc, float *Bp) {
    for (int64_t j = 0; j < nc; j += NR, Bp += kc * NR) {
        const int64_t w = nc - j < NR ? nc - j : NR;
        if (!tb) {
            const __mmask16 k0 = mask_of(w), k1 = mask_of(w - 16);
            const float *src = B + j;
            for (int64_t p = 0; p < kc; p++, src += ldb) {
                _mm512_store_ps(Bp + p * NR, _mm512_maskz_loadu_ps(k0, src));
                _mm512_store_ps(Bp + p * NR + 16, _mm512_maskz_loadu_ps(k1, src + 16));
            }
            continue;
        }
        for (int64_t h = 0; h < NR; h += 16) {
            const int64_t rows = w - h < 0 ? 0 : (w - h < 16 ? w - h : 16);
            const float *src = B + (j + h) * ldb;
            for (int64_t p = 0; p < kc; p += 16) {
                const int64_t steps = kc - p < 16 ? kc - p : 16;
                const __mmask16 km = mask_of(steps);
                __m512 r[16];
                for (int q = 0; q < 16; q++)
                    r[q] = q < rows ? _mm512_maskz_loadu_ps(km, src + q * ldb + p) : _mm512_setzero_ps();
                transpose16(r);
                for (int q = 0; q < steps; q++) _mm512_store_ps(Bp + (p + q) * NR + h, r[q]);
            }
        }
    }
}

/* op(A) (mc x kc) -> panels of MR rows. ta = 1: A is stored [k][m], so each step's MR values are contiguous;
   ta = 0: 16 steps of up to 16 rows are loaded as rows and transposed in registers. */
TGT static void pack_a512(int ta, const float *A, int64_t lda, int64_t mc, int64_t kc, float *Ap) {
    const __mmask16 kmr = mask_of(MR);
    for (int64_t i = 0; i < mc; i += MR, Ap += MR * kc) {
        const int64_t mr = mc - i < MR ? mc - i : MR;
        if (ta) {
            const __mmask16 km = mask_of(mr);
            for (int64_t p = 0; p < kc; p++) _mm512_mask_storeu_ps(Ap + p * MR, kmr, _mm512_maskz_loadu_ps(km, A + p * lda + i));
            continue;
        }
        for (int64_t p = 0; p < kc; p += 16) {
            const int64_t steps = kc - p < 16 ? kc - p : 16;
            const __mmask16 km = mask_of(steps);
            __m512 r[16];
            for (int q = 0; q < 16; q++)
                r[q] = q < mr ? _mm512_maskz_loadu_ps(km, A + (i + q) * lda + p) : _mm512_setzero_ps();
            transpose16(r);
            for (int q = 0; q < steps; q++) _mm512_mask_storeu_ps(Ap + (p + q) * MR, kmr, r[q]);
        }
    }
}

int rumus_sgemm_avx512_get(rumus_sgemm_part *isa) {
    isa->name = "AVX-512";
    isa->pack_a = pack_a512;
    isa->mr = MR;
    isa->nr = NR;
    isa->pack_b = pack_b512;
    isa->block = block512;
    return 1;
}

#else
int rumus_sgemm_avx512_get(rumus_sgemm_part *isa) {
    RUMUS_UNUSED(isa);
    return 0;
}
#endif

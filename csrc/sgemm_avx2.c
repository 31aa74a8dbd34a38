/* The float32 GEMM's AVX2+FMA part, for CPUs without AVX-512 (csrc/internal/sgemm.h has the layouts): a
   micro-kernel of 6 rows x 16 columns (two ymm per row: 12 accumulators + 2 B vectors + a broadcast of the
   16 ymm), and op(B)'s packing (rows copied, or 8x8 register transposes when B is stored transposed).
   Same structure as csrc/sgemm_avx512.c; per-function target attributes, called only when cpuid reports
   AVX2 and FMA. */
#include "internal/rumus.h"
#include "internal/sgemm.h"

#if (defined(__x86_64__) || defined(_M_X64)) && ((defined(__GNUC__) && __GNUC__ >= 8) || defined(__clang__))
#define RUMUS_SGEMM_AVX2 1
#include <immintrin.h>
#endif

#ifdef RUMUS_SGEMM_AVX2
#define TGT __attribute__((target("avx2,fma")))
#define INL __attribute__((target("avx2,fma"), always_inline)) static inline
#define MR 6
#define NR 16

/* lanes [0, w) of an 8-lane vector (w clamped to [0, 8]), as maskload/maskstore take them */
static const int32_t MASKS[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
INL __m256i mask_of(int64_t w) {
    w = w < 0 ? 0 : (w > 8 ? 8 : w);
    return _mm256_loadu_si256((const __m256i *)(MASKS + 8 - w));
}

/* C tile [mr x nr] (nr <= 8*nv) = (load_c ? C : 0) + a @ b over kc; mr and nv are constants after inlining. */
INL void tile(const int mr, const int nv, int64_t kc, const float *restrict a, const float *restrict b, float *c,
              int64_t ldc, int64_t nr, int load_c) {
    __m256 acc0[MR], acc1[MR];
    const __m256i k0 = mask_of(nr), k1 = mask_of(nr - 8);
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        acc0[i] = !load_c ? _mm256_setzero_ps()
                          : (nr >= 8 ? _mm256_loadu_ps(c + i * ldc) : _mm256_maskload_ps(c + i * ldc, k0));
        if (nv > 1)
            acc1[i] = !load_c ? _mm256_setzero_ps()
                              : (nr >= 16 ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_maskload_ps(c + i * ldc + 8, k1));
    }
#pragma GCC unroll 2
    for (int64_t p = 0; p < kc; p++) {
        const __m256 b0 = _mm256_load_ps(b + p * NR);
        const __m256 b1 = nv > 1 ? _mm256_load_ps(b + p * NR + 8) : b0;
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + p * MR + i);
            acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
            if (nv > 1) acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
        }
    }
    if (nr == 8 * nv) { /* a full tile: plain stores (vmaskmovps stores are slow on AMD cores) */
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            _mm256_storeu_ps(c + i * ldc, acc0[i]);
            if (nv > 1) _mm256_storeu_ps(c + i * ldc + 8, acc1[i]);
        }
        return;
    }
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
        _mm256_maskstore_ps(c + i * ldc, k0, acc0[i]);
        if (nv > 1) _mm256_maskstore_ps(c + i * ldc + 8, k1, acc1[i]);
    }
}

typedef void (*tile_fn)(int64_t, const float *, const float *, float *, int64_t, int64_t, int);

#define TILE_FN(R, V)                                                                                       \
    TGT static void tile_##R##_##V(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t nr, \
                                   int load_c) {                                                            \
        tile(R, V, kc, a, b, c, ldc, nr, load_c);                                                           \
    }
#define TILE_ROWS(R) TILE_FN(R, 1) TILE_FN(R, 2)
TILE_ROWS(1) TILE_ROWS(2) TILE_ROWS(3) TILE_ROWS(4) TILE_ROWS(5) TILE_ROWS(6)

#define TILE_PAIR(R) {tile_##R##_1, tile_##R##_2}
static const tile_fn TILES[MR][2] = {TILE_PAIR(1), TILE_PAIR(2), TILE_PAIR(3), TILE_PAIR(4), TILE_PAIR(5),
                                     TILE_PAIR(6)};

TGT static void block256(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                         int64_t ldc, int load_c) {
    for (int64_t j = 0; j < nc; j += NR) {
        const int64_t nr = nc - j < NR ? nc - j : NR;
        const float *b = Bp + j * kc;
        for (int64_t i = 0; i < mc; i += MR) {
            const int64_t mr = mc - i < MR ? mc - i : MR;
            TILES[mr - 1][nr > 8](kc, Ap + i * kc, b, C + i * ldc + j, ldc, nr, load_c);
        }
    }
}

/* rows[0..8) (each 8 floats) -> their transpose, in place. */
INL void transpose8(__m256 *r) {
    __m256 u[8];
    for (int g = 0; g < 2; g++) {
        const __m256 lo01 = _mm256_unpacklo_ps(r[4 * g], r[4 * g + 1]), hi01 = _mm256_unpackhi_ps(r[4 * g], r[4 * g + 1]);
        const __m256 lo23 = _mm256_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
        const __m256 hi23 = _mm256_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
        /* u[4g + c], 128-bit lane l: column 4l + c of rows 4g..4g+3 */
        u[4 * g] = _mm256_shuffle_ps(lo01, lo23, 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(lo01, lo23, 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(hi01, hi23, 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(hi01, hi23, 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* op(B) (kc x nc) -> panels of 16 columns; as pack_b512 with 8x8 transposes. */
TGT static void pack_b256(int tb, const float *B, int64_t ldb, int64_t kc, int64_t nc, float *Bp) {
    for (int64_t j = 0; j < nc; j += NR, Bp += kc * NR) {
        const int64_t w = nc - j < NR ? nc - j : NR;
        if (!tb) {
            const __m256i k0 = mask_of(w), k1 = mask_of(w - 8);
            const float *src = B + j;
            if (w == NR)
                for (int64_t p = 0; p < kc; p++, src += ldb) {
                    _mm256_store_ps(Bp + p * NR, _mm256_loadu_ps(src));
                    _mm256_store_ps(Bp + p * NR + 8, _mm256_loadu_ps(src + 8));
                }
            else
                for (int64_t p = 0; p < kc; p++, src += ldb) {
                    _mm256_store_ps(Bp + p * NR, _mm256_maskload_ps(src, k0));
                    _mm256_store_ps(Bp + p * NR + 8, _mm256_maskload_ps(src + 8, k1));
                }
            continue;
        }
        for (int64_t h = 0; h < NR; h += 8) {
            const int64_t rows = w - h < 0 ? 0 : (w - h < 8 ? w - h : 8);
            const float *src = B + (j + h) * ldb;
            for (int64_t p = 0; p < kc; p += 8) {
                const int64_t steps = kc - p < 8 ? kc - p : 8;
                const __m256i km = mask_of(steps);
                __m256 r[8];
                for (int q = 0; q < 8; q++)
                    r[q] = q < rows ? _mm256_maskload_ps(src + q * ldb + p, km) : _mm256_setzero_ps();
                transpose8(r);
                for (int q = 0; q < steps; q++) _mm256_store_ps(Bp + (p + q) * NR + h, r[q]);
            }
        }
    }
}

/* op(A) (mc x kc) -> panels of 6 rows; as pack_a512 with 8x8 transposes (rows 6 and 7 zero). Each step's
   6 values are stored as 8 (plain stores; the next step's store overwrites the 2 extra, the driver leaves
   room after the block for the last one). */
TGT static void pack_a256(int ta, const float *A, int64_t lda, int64_t mc, int64_t kc, float *Ap) {
    for (int64_t i = 0; i < mc; i += MR, Ap += MR * kc) {
        const int64_t mr = mc - i < MR ? mc - i : MR;
        if (ta) {
            const __m256i km = mask_of(mr);
            for (int64_t p = 0; p < kc; p++) _mm256_storeu_ps(Ap + p * MR, _mm256_maskload_ps(A + p * lda + i, km));
            continue;
        }
        for (int64_t p = 0; p < kc; p += 8) {
            const int64_t steps = kc - p < 8 ? kc - p : 8;
            const __m256i km = mask_of(steps);
            __m256 r[8];
            for (int q = 0; q < 8; q++)
                r[q] = q < mr ? _mm256_maskload_ps(A + (i + q) * lda + p, km) : _mm256_setzero_ps();
            transpose8(r);
            for (int q = 0; q < steps; q++) _mm256_storeu_ps(Ap + (p + q) * MR, r[q]);
        }
    }
}

int rumus_sgemm_avx2_get(rumus_sgemm_part *isa) {
    isa->name = "AVX2";
    isa->pack_a = pack_a256;
    isa->mr = MR;
    isa->nr = NR;
    isa->pack_b = pack_b256;
    isa->block = block256;
    return 1;
}

#else
int rumus_sgemm_avx2_get(rumus_sgemm_part *isa) {
    RUMUS_UNUSED(isa);
    return 0;
}
#endif

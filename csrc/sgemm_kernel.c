/* RUMUS's own single-threaded float32 GEMM, C = op(A) @ op(B) or C += op(A) @ op(B), row-major, for the
   calls csrc/gemm_blocked.c's rumus_gemm_one makes (GEMM blocks, the fused convolution's products).

   Why: those calls are small (the MNIST CNN's conv2 is [32 x 144] @ [144 x 196] per sample), and at such
   sizes OpenBLAS's single-threaded sgemm reached ~38 GMAC/s of a Zen 5 core's ~83 (numpy's OpenBLAS also
   picks its Haswell kernels there). BLIS-style: K is cut into blocks of KC, C into blocks of MC rows and NC
   columns; op(B)'s block and op(A)'s block are packed (csrc/internal/sgemm.h has the layouts) into a
   per-thread scratch kept between calls, and the ISA's register-blocked micro-kernel runs over them
   (csrc/sgemm_avx512.c, csrc/sgemm_avx2.c; chosen once from cpuid).

   Every C element is one chain of fused multiply-adds over k in order, from 0 (accumulate = 0: C is only
   written, never read, as BLAS with beta = 0) or from C's value: the same bits whatever the blocking, the
   ISA part, the thread or where C sits, so csrc/gemm_blocked.c's blocks stay bit-identical at every thread
   count. NaN and Inf propagate as in a plain sum of products (nothing is skipped). */
#include <pthread.h>
#include <stdlib.h>

#include "internal/rumus.h"
#include "internal/sgemm.h"
#include "sgemm_kernel.h"

#define KC 256  /* steps per block: a panel of op(B), KC x NR, stays in L1 */
#define MC 144  /* rows of op(A) per block (rounded to MR): the packed block stays in L2 */
#define NC 1024 /* columns of op(B) per block (rounded to NR) */

enum { ISA_NONE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };
enum { MODE_AUTO = 0, MODE_BLAS = 1, MODE_OWN = 2 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_best = ISA_NONE, g_isa_id = ISA_NONE, g_mode = MODE_AUTO;
static rumus_sgemm_part g_isa;

static int best_isa(void) {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
    rumus_sgemm_part probe;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") && rumus_sgemm_avx512_get(&probe))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && rumus_sgemm_avx2_get(&probe))
        return ISA_AVX2;
#endif
    return ISA_NONE;
}

static void use_isa(int isa) {
    g_isa_id = isa;
    if (isa == ISA_AVX512)
        rumus_sgemm_avx512_get(&g_isa);
    else if (isa == ISA_AVX2)
        rumus_sgemm_avx2_get(&g_isa);
}

static void init_once(void) {
    g_best = best_isa();
    use_isa(g_best);
}

static void init(void) { pthread_once(&g_once, init_once); }

/* The setters are for load time (backends/rumus_cpu/threads.py reads RUMUS_GEMM_KERNEL) and for tests; they
   must not run while GEMMs are in flight. */
int rumus_sgemm_set_isa(int isa) {
    init();
    use_isa(isa < 0 || isa > g_best ? g_best : isa); /* never more than the CPU has */
    return g_isa_id;
}

int rumus_sgemm_isa(void) {
    init();
    return g_isa_id;
}

const char *rumus_sgemm_isa_name(void) {
    init();
    return g_isa_id == ISA_NONE ? "none" : g_isa.name;
}

int rumus_sgemm_set_mode(int mode) {
    init();
    g_mode = mode == MODE_BLAS || mode == MODE_OWN ? mode : MODE_AUTO;
    return g_mode;
}

int rumus_sgemm_mode(void) { return g_mode; }

/* Which float32 calls `auto` gives the own kernel, per ISA part: at least AUTO_MIN_N columns (below that a
   32-column panel is mostly padding and packing op(A) costs more than the products: OpenBLAS's narrow paths
   win) and at most AUTO_MAX_MACS multiply-adds (-1: no limit). Measured at one thread on the dev machine (Zen 5,
   numpy's OpenBLAS with its Haswell kernels; `benchmarks/gemm_kernel.py --rule`, benchmarks/RESULTS.md): the
   AVX-512 part is 1.2-2.8x OpenBLAS from 9 columns up at every size tried (up to 512x512x4096), 0.94-1.01x at
   4-8 columns, 0.73x at 1-2; the AVX2 part is 1.0-1.45x from 12 columns up to 2^22 multiply-adds (its wins are
   the small calls), 0.94-1.02x above, 0.6-0.9x below 12 columns. */
static const int64_t AUTO_MIN_N[3] = {0, 12, 9};
static const int64_t AUTO_MAX_MACS[3] = {0, (int64_t)1 << 22, -1};

int64_t rumus_sgemm_auto_min_n(void) { return AUTO_MIN_N[rumus_sgemm_isa()]; }
int64_t rumus_sgemm_auto_max_macs(void) { return AUTO_MAX_MACS[rumus_sgemm_isa()]; }

int rumus_sgemm_auto_routes(int64_t m, int64_t n, int64_t k) {
    const int isa = rumus_sgemm_isa();
    if (isa == ISA_NONE || n < AUTO_MIN_N[isa]) return 0;
    return AUTO_MAX_MACS[isa] < 0 || (double)m * (double)n * (double)k <= (double)AUTO_MAX_MACS[isa];
}

int rumus_sgemm_routes(int64_t m, int64_t n, int64_t k) {
    init();
    if (g_isa_id == ISA_NONE || g_mode == MODE_BLAS) return 0;
    return g_mode == MODE_OWN || rumus_sgemm_auto_routes(m, n, k);
}

/* Each thread's packed blocks, kept between calls (the kernels' threads live as long as the process). */
static _Thread_local float *t_pack = NULL;
static _Thread_local size_t t_pack_floats = 0;

static float *pack_scratch(size_t floats) {
    if (floats > t_pack_floats) {
        free(t_pack);
        t_pack = (float *)aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
        t_pack_floats = t_pack ? floats : 0;
    }
    return t_pack;
}

int rumus_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                int64_t ldb, int accumulate, float *C, int64_t ldc) {
    init();
    if (g_isa_id == ISA_NONE) return 0;
    if (m <= 0 || n <= 0) return 1;
    if (k <= 0) { /* an empty sum: C = 0 (beta = 0) or C unchanged */
        if (!accumulate)
            for (int64_t i = 0; i < m; i++) memset(C + i * ldc, 0, (size_t)n * sizeof(float));
        return 1;
    }
    const rumus_sgemm_part isa = g_isa;
    const int64_t mr = isa.mr, nr = isa.nr;
    const int64_t kcb = k < KC ? k : KC;
    const int64_t mcb = (m < MC ? m : MC) + mr - 1, ncb = (n < NC ? n : NC) + nr - 1;
    const int64_t a_floats = (mcb / mr * mr * kcb + 16 + 15) / 16 * 16, b_floats = ncb / nr * nr * kcb;
    float *Ap = pack_scratch((size_t)(a_floats + b_floats));
    if (!Ap) return 0;
    /* Bp: 16 floats of room after op(A)'s block (its packing may store a vector past the end), and 64-byte
       aligned, as the micro-kernels' loads want */
    float *Bp = Ap + a_floats;
    const int64_t mc_step = MC / mr * mr, nc_step = NC / nr * nr;
    for (int64_t jc = 0; jc < n; jc += nc_step) {
        const int64_t nc = n - jc < nc_step ? n - jc : nc_step;
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = k - pc < KC ? k - pc : KC;
            isa.pack_b(tb, tb ? B + jc * ldb + pc : B + pc * ldb + jc, ldb, kc, nc, Bp);
            for (int64_t ic = 0; ic < m; ic += mc_step) {
                const int64_t mc = m - ic < mc_step ? m - ic : mc_step;
                isa.pack_a(ta, ta ? A + pc * lda + ic : A + ic * lda + pc, lda, mc, kc, Ap);
                isa.block(mc, nc, kc, Ap, Bp, C + ic * ldc + jc, ldc, accumulate || pc > 0);
            }
        }
    }
    return 1;
}

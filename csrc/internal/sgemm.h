/* The float32 GEMM's driver (csrc/sgemm_kernel.c) and its per-ISA parts (csrc/sgemm_avx512.c,
   csrc/sgemm_avx2.c). The driver cuts C and K into cache blocks and packs them; an ISA part packs
   op(B) into its panel layout and runs its register-blocked micro-kernel over a packed block.

   Packed layouts (MR rows, NR columns: the ISA's register block):
   - op(A) block [mc x kc]: panels of MR rows, panel r at Ap + r*MR*kc, element (i, p) at [p*MR + i];
     rows past mc are zero.
   - op(B) block [kc x nc]: panels of NR columns, panel s at Bp + s*kc*NR, element (p, j) at [p*NR + j];
     columns past nc are zero.
   Every C element is one chain of fused multiply-adds over p in order, started from 0 (or from C when
   `load_c`): the result depends on the data alone, never on the blocking, the ISA or the thread. */
#ifndef RUMUS_SGEMM_INTERNAL_H
#define RUMUS_SGEMM_INTERNAL_H

#include <stdint.h>

typedef struct {
    const char *name;
    int mr, nr;
    /* op(A) rows [0, mc) x steps [0, kc) (A as stored; ta: stored [k][m]) -> Ap, panels of MR rows */
    void (*pack_a)(int ta, const float *A, int64_t lda, int64_t mc, int64_t kc, float *Ap);
    /* op(B)[pc.., jc..] (B as stored; tb: stored [n][k]) -> Bp, kc x nc, zero-padded to panels of NR */
    void (*pack_b)(int tb, const float *B, int64_t ldb, int64_t kc, int64_t nc, float *Bp);
    /* C[mc x nc] (ldc) = (load_c ? C : 0) + Ap @ Bp, over kc */
    void (*block)(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc,
                  int load_c);
} rumus_sgemm_part;

/* Each returns 1 and fills *isa if this compiler built that part, else 0 (the CPU is asked elsewhere). */
int rumus_sgemm_avx512_get(rumus_sgemm_part *isa);
int rumus_sgemm_avx2_get(rumus_sgemm_part *isa);

#endif

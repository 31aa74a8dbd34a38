/* RUMUS's own float32 GEMM (csrc/sgemm_kernel.c): C = op(A) @ op(B) (+ C when accumulate), row-major, the
   arguments of rumus_gemm_one. Returns 0 where it cannot run (no AVX2/AVX-512 part, no scratch memory):
   nothing was written, the caller takes OpenBLAS. */
int rumus_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                int64_t ldb, int accumulate, float *C, int64_t ldc);
/* the ISA part in force: 0 none, 1 AVX2+FMA, 2 AVX-512F; set_isa forces a lower one (-1: the best), for tests */
int rumus_sgemm_isa(void);
int rumus_sgemm_set_isa(int isa);
const char *rumus_sgemm_isa_name(void);
/* rumus_gemm_one's float32 route (RUMUS_GEMM_KERNEL): 0 auto (by shape), 1 OpenBLAS, 2 own; set once at load */
int rumus_sgemm_set_mode(int mode);
int rumus_sgemm_mode(void);
/* whether a float32 call of this shape goes to the own kernel now, and under `auto` */
int rumus_sgemm_routes(int64_t m, int64_t n, int64_t k);
int rumus_sgemm_auto_routes(int64_t m, int64_t n, int64_t k);
/* `auto`'s rule for the ISA part in force: calls of at least min_n columns and at most max_macs
   multiply-adds (-1: any size) */
int64_t rumus_sgemm_auto_min_n(void);
int64_t rumus_sgemm_auto_max_macs(void);

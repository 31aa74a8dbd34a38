int rumus_gemm_attach(uintptr_t sgemm, uintptr_t dgemm, int int64_ints);
int rumus_gemm_attached(void);
void rumus_gemm_blocks(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t *bm, int64_t *bn);
int rumus_gemm(int f64, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const void *A, int64_t a_bo,
               int64_t a_bi, int64_t lda, int ta, const void *B, int64_t b_bo, int64_t b_bi, int64_t ldb, int tb,
               void *C, int64_t c_bo, int64_t c_bi, int64_t ldc);
int rumus_gemm_bias(int f64, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k, const void *A,
                    int64_t a_bo, int64_t a_bi, int64_t lda, int ta, const void *B, int64_t b_bo, int64_t b_bi,
                    int64_t ldb, int tb, void *C, int64_t c_bo, int64_t c_bi, int64_t ldc, const void *bias);
int rumus_gemm_fits(int64_t a, int64_t b, int64_t c);
int rumus_gemm_one(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda, const void *B,
                   int64_t ldb, int accumulate, void *C, int64_t ldc);
int rumus_gemm_one_held(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                        const void *B, int64_t ldb, int accumulate, void *C, int64_t ldc);

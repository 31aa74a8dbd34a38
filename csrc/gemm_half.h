int rumus_gemm_half(int bf16, int64_t batch, const int64_t *offsets, int64_t m, int64_t n, int64_t k,
                    const uint16_t *A, int64_t a_sr, int64_t a_sc, const uint16_t *B, int64_t b_sr, int64_t b_sc,
                    uint16_t *C, int64_t c_sr, int64_t c_sc);

void rumus_fixed_linear(int16_t *out, int64_t out_sm, int64_t out_sn, const int16_t *x, int64_t x_sm,
                        int64_t x_sk, const int16_t *w, int64_t w_sk, int64_t w_sn, const int16_t *bias,
                        int64_t b_s, int64_t m, int64_t k, int64_t n, int scale_log2);
void rumus_fixed_requantize(int16_t *out, const int64_t *acc, int64_t count, int scale_log2);
void rumus_fixed_relu(int16_t *out, const int16_t *x, int64_t count);

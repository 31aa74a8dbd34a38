void rumus_q8_quantize(uint32_t *words, const float *w, int64_t k, int64_t n, int64_t block_size);
void rumus_q8_dequantize(float *out, const uint32_t *words, int64_t k, int64_t n, int64_t block_size);
void rumus_q8_linear(float *out, const float *x, const uint32_t *words, int64_t m, int64_t k, int64_t n,
                     int64_t block_size);
void rumus_int4_quantize(uint32_t *words, float *scales, float *zeros, const float *w, int64_t k, int64_t n,
                         int64_t group_size);
void rumus_int4_dequantize(float *out, const uint32_t *words, const float *scales, const float *zeros, int64_t k,
                           int64_t n, int64_t group_size);
void rumus_int4_linear(float *out, const float *x, const uint32_t *words, const float *scales, const float *zeros,
                       int64_t m, int64_t k, int64_t n, int64_t group_size);
int rumus_quant_isa(void);
int rumus_quant_best_isa(void);
void rumus_quant_set_isa(int isa);
void rumus_quant_set_panel_rows(int64_t min_m);

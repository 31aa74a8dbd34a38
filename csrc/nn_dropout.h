void rumus_dropout_f32(float *o, const float *x, int64_t n, double p, uint32_t seed, uint32_t offset);
void rumus_dropout_f64(double *o, const double *x, int64_t n, double p, uint32_t seed, uint32_t offset);
void rumus_dropout_f16(uint16_t *o, const uint16_t *x, int64_t n, double p, uint32_t seed, uint32_t offset);
void rumus_dropout_bf16(uint16_t *o, const uint16_t *x, int64_t n, double p, uint32_t seed, uint32_t offset);

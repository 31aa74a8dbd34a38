/* Each returns 1, or 0 where a block's scratch could not be allocated (the outputs are then incomplete). */
int rumus_flash_attention_f32(const float *q, const float *k, const float *v, const float *bias, const float *kb,
                               float *out, float *lse, const int64_t *dims, const int64_t *strides, int is_causal,
                               double scale, double p, uint32_t seed, uint32_t offset);
int rumus_flash_attention_f64(const double *q, const double *k, const double *v, const double *bias,
                               const double *kb, double *out, double *lse, const int64_t *dims,
                               const int64_t *strides, int is_causal, double scale, double p, uint32_t seed,
                               uint32_t offset);
int rumus_flash_attention_backward_f32(const float *q, const float *k, const float *v, const float *out,
                                        const float *dout, const float *lse, const float *bias, const float *kb,
                                        float *dq, float *dk, float *dv, const int64_t *dims, const int64_t *strides,
                                        int is_causal, double scale, double p, uint32_t seed, uint32_t offset);
int rumus_flash_attention_backward_f64(const double *q, const double *k, const double *v, const double *out,
                                        const double *dout, const double *lse, const double *bias,
                                        const double *kb, double *dq, double *dk, double *dv, const int64_t *dims,
                                        const int64_t *strides, int is_causal, double scale, double p,
                                        uint32_t seed, uint32_t offset);

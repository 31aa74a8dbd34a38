void rumus_batch_norm_stats_f32(const void *x, void *mean, void *var, int64_t n, int64_t c, int64_t s);
void rumus_batch_norm_stats_f64(const void *x, void *mean, void *var, int64_t n, int64_t c, int64_t s);
void rumus_batch_norm_f32(const void *x, const void *w, const void *b, const void *mean, const void *var, void *y,
                          int64_t n, int64_t c, int64_t s, double eps, int training);
void rumus_batch_norm_f64(const void *x, const void *w, const void *b, const void *mean, const void *var, void *y,
                          int64_t n, int64_t c, int64_t s, double eps, int training);
void rumus_batch_norm_backward_f32(const void *g, const void *x, const void *w, const void *mean, const void *var,
                                   void *gx, void *gw, void *gb, int64_t n, int64_t c, int64_t s, double eps,
                                   int training);
void rumus_batch_norm_backward_f64(const void *g, const void *x, const void *w, const void *mean, const void *var,
                                   void *gx, void *gw, void *gb, int64_t n, int64_t c, int64_t s, double eps,
                                   int training);
void rumus_batch_norm_stats_f16(const void *x, void *mean, void *var, int64_t n, int64_t c, int64_t s);
void rumus_batch_norm_f16(const void *x, const void *w, const void *b, const void *mean, const void *var, void *y,
                          int64_t n, int64_t c, int64_t s, double eps, int training);
void rumus_batch_norm_backward_f16(const void *g, const void *x, const void *w, const void *mean, const void *var,
                                   void *gx, void *gw, void *gb, int64_t n, int64_t c, int64_t s, double eps,
                                   int training);
void rumus_batch_norm_stats_bf16(const void *x, void *mean, void *var, int64_t n, int64_t c, int64_t s);
void rumus_batch_norm_bf16(const void *x, const void *w, const void *b, const void *mean, const void *var, void *y,
                          int64_t n, int64_t c, int64_t s, double eps, int training);
void rumus_batch_norm_backward_bf16(const void *g, const void *x, const void *w, const void *mean, const void *var,
                                   void *gx, void *gw, void *gb, int64_t n, int64_t c, int64_t s, double eps,
                                   int training);

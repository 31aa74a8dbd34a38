void rumus_cross_entropy_fwd_f32(const float *x, const int64_t *t, const float *w, float *loss, float *lse, int64_t m, int64_t c, int64_t ignore_index, double label_smoothing);
void rumus_cross_entropy_fwd_f64(const double *x, const int64_t *t, const double *w, double *loss, double *lse, int64_t m, int64_t c, int64_t ignore_index, double label_smoothing);
void rumus_cross_entropy_bwd_f32(const float *g, const float *x, const int64_t *t, const float *w, const float *lse, float *dx, int64_t m, int64_t c, int64_t ignore_index, double label_smoothing);
void rumus_cross_entropy_bwd_f64(const double *g, const double *x, const int64_t *t, const double *w, const double *lse, double *dx, int64_t m, int64_t c, int64_t ignore_index, double label_smoothing);

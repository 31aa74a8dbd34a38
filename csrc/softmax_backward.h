void rumus_softmax_backward_f32(const float *g, const float *y, float *dx, int64_t outer, int64_t n, int64_t inner, int log_form);
void rumus_softmax_backward_f64(const double *g, const double *y, double *dx, int64_t outer, int64_t n, int64_t inner, int log_form);

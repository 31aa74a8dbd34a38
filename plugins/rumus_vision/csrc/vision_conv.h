void rv_conv2d_f32(const void *x, const void *w, void *y, const int64_t *geom);
void rv_conv2d_f64(const void *x, const void *w, void *y, const int64_t *geom);
void rv_conv2d_backward_input_f32(const void *gy, const void *w, void *gx, const int64_t *geom);
void rv_conv2d_backward_input_f64(const void *gy, const void *w, void *gx, const int64_t *geom);
void rv_conv2d_backward_weight_f32(const void *gy, const void *x, void *gw, const int64_t *geom);
void rv_conv2d_backward_weight_f64(const void *gy, const void *x, void *gw, const int64_t *geom);
int rv_openmp_threads(void);

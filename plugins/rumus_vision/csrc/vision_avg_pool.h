void rv_avg_pool2d_f32(const void *x, void *y, const int64_t *geom);
void rv_avg_pool2d_f64(const void *x, void *y, const int64_t *geom);
int rv_avg_pool2d_backward_f32(const void *gy, void *gx, const int64_t *geom);
int rv_avg_pool2d_backward_f64(const void *gy, void *gx, const int64_t *geom);

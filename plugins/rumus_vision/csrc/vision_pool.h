void rv_max_pool2d_f32(const void *x, void *y, const int64_t *geom);
void rv_max_pool2d_f64(const void *x, void *y, const int64_t *geom);
